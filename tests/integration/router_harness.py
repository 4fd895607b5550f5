"""Starts kvrouter and fake workers on loopback for integration tests, and talks HTTP to them."""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


class Worker:
    def __init__(self, name, *flags):
        self.name = name
        self.dir = tempfile.mkdtemp()
        port_file = os.path.join(self.dir, "port")
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_worker.py"), "--port-file", port_file,
                                      "--name", name, *flags])
        deadline = time.time() + 10
        while not os.path.exists(port_file):
            if time.time() > deadline:
                raise RuntimeError(f"fake worker {name} did not start")
            time.sleep(0.02)
        self.port = int(open(port_file).read())
        self.tls = "--tls-cert" in flags  # the test knows the host its certificate names
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def _connection(self):
        if self.tls:
            import ssl
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=5, context=ssl._create_unverified_context())
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)

    def stats(self):
        c = self._connection()
        c.request("GET", "/stats")
        return json.loads(c.getresponse().read())

    def set_health(self, status):
        self.control(health=status)

    def set_metrics(self, text):
        """What the worker's GET /metrics answers from now on (Prometheus text)."""
        self.control(metrics=text)

    def control(self, **settings):
        c = self._connection()
        c.request("POST", "/control", body=json.dumps(settings))
        c.getresponse().read()

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Mocker:
    """A kvrouter-mocker process on a free loopback port (or on `port`: a worker restarted where
    the router knows it)."""
    def __init__(self, binary, *flags, port=0):
        self.binary, self.flags = binary, flags
        self.dir = tempfile.mkdtemp()
        port_file = os.path.join(self.dir, "port")
        self.proc = subprocess.Popen([binary, "--port", str(port), "--port-file", port_file, *flags], stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while not os.path.exists(port_file):
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"kvrouter-mocker {flags} did not start")
            time.sleep(0.02)
        self.port = int(open(port_file).read())
        self.url = f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request(method, path, body=json.dumps(body) if body is not None else None)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def metric(self, name):
        total = 0.0
        for line in self.request("GET", "/metrics")[1].decode().splitlines():
            if line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def restarted(self):
        """The same worker started again on its port, once this process has ended."""
        self.proc.wait(timeout=10)
        return Mocker(self.binary, *self.flags, port=self.port)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


def wait_for(condition, timeout):
    """Polls `condition` until it returns something true (returned) or `timeout` seconds pass
    (its last value is returned)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return condition()


def free_port():
    """A port nobody listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Router:
    def __init__(self, kvrouter, model, worker_specs, *flags, fd_limit=None):
        # A short grace: a test's stop() should not wait 30 s for a request it left hanging.
        args = [kvrouter, "--host", "127.0.0.1", "--port", "0", "--threads", "2", "--shutdown-grace-secs", "3"]
        if model:
            args += ["--model", model]
        for spec in worker_specs:
            args += ["--worker", spec]
        args += list(flags)
        def limit_fds():
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))
        self.proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, preexec_fn=limit_fds if fd_limit else None)
        seen = ""
        while True:  # warnings may come first
            line = self.proc.stderr.readline()
            seen += line
            match = re.search(r"serving .* on http://[^:]+:(\d+)", line)
            if match or not line:
                break
        if not match:
            raise RuntimeError(f"kvrouter did not start: {seen}{self.proc.stderr.read()}")
        self.port = int(match.group(1))
        # The rest of stderr is collected by a thread (a pipe nobody reads would fill and block
        # kvrouter; and lines already buffered by a reader would escape select()).
        import threading
        self.log = seen
        self._log_lock = threading.Lock()
        self._log_reader = threading.Thread(target=self._collect_log, daemon=True)
        self._log_reader.start()

    def _collect_log(self):
        for line in self.proc.stderr:
            with self._log_lock:
                self.log += line

    def wait_for_log(self, text, timeout=10.0):
        """Waits until kvrouter's stderr shows `text` (true) or `timeout` passes (false)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self._log_lock:
                if text in self.log:
                    return True
            time.sleep(0.02)
        return False

    def full_log(self):
        """Everything kvrouter wrote to stderr, once it has stopped."""
        self._log_reader.join(timeout=10)
        with self._log_lock:
            return self.log

    def request(self, method, path, body=None, headers=None, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        payload = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        c.request(method, path, body=payload, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data

    def chat(self, model="m", stream=False, content="hi", headers=None):
        return self.request("POST", "/v1/chat/completions",
                            {"model": model, "stream": stream, "messages": [{"role": "user", "content": content}]},
                            headers)

    def metrics(self):
        """/metrics as {sample: value}, checked as strict Prometheus parsers check the text format:
        each family declared once (one HELP, one TYPE, before its samples), every sample in a
        declared family, no sample twice."""
        status, _, body = self.request("GET", "/metrics")
        assert status == 200
        values, helps, types = {}, set(), set()
        for line in body.decode().splitlines():
            if line.startswith("# HELP ") or line.startswith("# TYPE "):
                kind, family = line[2:6], line.split(" ")[2]
                seen = helps if kind == "HELP" else types
                assert family not in seen, f"/metrics declares {kind} of {family} twice"
                seen.add(family)
            elif line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                family = name.split("{", 1)[0]
                for suffix in ("_bucket", "_sum", "_count"):  # a histogram's series
                    if family not in types and family.endswith(suffix):
                        family = family[:-len(suffix)]
                assert family in helps and family in types, f"/metrics: sample {name} of an undeclared family"
                assert name not in values, f"/metrics: sample {name} twice"
                values[name] = float(value)
        return values

    def worker_gauge(self, name, worker, model="m"):
        return self.metrics()[f'{name}{{set="{model}",model="{model}",worker="{worker}"}}']

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RuntimeError("kvrouter did not stop on SIGTERM")
        return self.proc.returncode


class BackgroundLoad:
    """Chat requests to `model` in a loop on a thread until stop(); `statuses` collects the answers."""

    def __init__(self, router, model):
        import threading
        self.statuses = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(router, model))
        self._thread.start()

    def _run(self, router, model):
        while not self._stop.is_set():
            self.statuses.append(router.chat(model=model)[0])

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.statuses


class Failures:
    def __init__(self):
        self.items = []

    def check(self, condition, what):
        print(("ok   " if condition else "FAIL ") + what)
        if not condition:
            self.items.append(what)

    def exit(self):
        if self.items:
            sys.exit(f"{len(self.items)} check(s) failed")
        print("all checks passed")
