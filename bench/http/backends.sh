# Sourced by the HTTP benchmarks: the fast backend (nginx answering a fixed chat completion) and
# HAProxy 2.6 in front of it, both one process and one thread, both killed by the caller's trap
# through the `pids` array.
#   start_nginx WORK PORT
#   start_haproxy WORK PORT BACKEND_PORT   (sets haproxy_pid)
# A caller that sets the array `backend_pin` (e.g. `(taskset -c 0)`) runs both under it.
[ -n "${backend_pin+set}" ] || backend_pin=()

start_nginx() {
  local work=$1 port=$2
  cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
error_log $work/nginx.err;
pid $work/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_max_body_size 64m;
  client_body_buffer_size 64k;
  server {
    listen 127.0.0.1:$port;
    location / {
      default_type application/json;
      return 200 '{"id":"cmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}';
    }
  }
}
NGINX
  "${backend_pin[@]}" nginx -c "$work/nginx.conf" -p "$work" &
  pids+=($!)
}

start_haproxy() {
  local work=$1 port=$2 backend=$3
  cat > "$work/haproxy.cfg" <<HAPROXY
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 600s
  http-reuse always
frontend in
  bind 127.0.0.1:$port
  default_backend workers
backend workers
  balance roundrobin
  server w0 127.0.0.1:$backend
HAPROXY
  "${backend_pin[@]}" haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
  pids+=($!)
  haproxy_pid=$!
}
