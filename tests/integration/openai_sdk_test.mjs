// Integration: the official `openai` npm SDK, a real client, runs chat completions through
// kvrouter to a fake worker, streaming and not.
//
//   node tests/integration/openai_sdk_test.mjs PATH/TO/kvrouter
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";

const here = dirname(fileURLToPath(import.meta.url));
const kvrouter = process.argv[2];
const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startWorker(name) {
  const portFile = join(mkdtempSync(join(tmpdir(), "kvr-")), "port");
  children.push(spawn("/usr/bin/python3", [join(here, "fake_worker.py"), "--port-file", portFile, "--name", name,
                                           "--chunks", "4", "--chunk-delay", "0.05"], { stdio: "inherit" }));
  for (let i = 0; i < 200 && !existsSync(portFile); i++) await sleep(25);
  return Number(readFileSync(portFile, "utf8"));
}

function startRouter(workerPort) {
  return new Promise((resolve, reject) => {
    const router = spawn(kvrouter, ["--model", "qwen3", "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                                    "--worker", `http://127.0.0.1:${workerPort},id=w0`, "--router-mode", "round-robin"]);
    children.push(router);
    let seen = "";
    router.stderr.on("data", (data) => {
      seen += data;
      const match = seen.match(/serving .* on http:\/\/[^:]+:(\d+)/);
      if (match) resolve(Number(match[1]));
    });
    router.on("exit", (code) => reject(new Error(`kvrouter exited with ${code}: ${seen}`)));
  });
}

let failures = 0;
function check(condition, what) {
  console.log(`${condition ? "ok  " : "FAIL"} ${what}`);
  if (!condition) failures++;
}

try {
  const workerPort = await startWorker("w0");
  const routerPort = await startRouter(workerPort);
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${routerPort}/v1`, apiKey: "not-needed", maxRetries: 0 });

  const models = await client.models.list();
  check(models.data.map((m) => m.id).includes("qwen3"), "models.list() shows the served model");

  const completion = await client.chat.completions.create({
    model: "qwen3", messages: [{ role: "user", content: "Hello" }] });
  check(completion.choices[0].message.content === "hello from w0", "a non-streaming chat completion parses");

  const stream = await client.chat.completions.create({
    model: "qwen3", stream: true, messages: [{ role: "user", content: "Hello" }] });
  let text = "";
  let chunks = 0;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    chunks++;
  }
  check(chunks === 4 && text === "tok0 tok1 tok2 tok3 ", `a streaming chat completion yields every chunk (${chunks}: "${text}")`);

  try {
    await client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] });
    check(false, "an unknown model raises");
  } catch (error) {
    check(error.status === 404 && error.code === "model_not_found", "an unknown model raises the SDK's 404 error with its code");
  }
} catch (error) {
  console.log(`FAIL ${error.stack ?? error}`);
  failures++;
} finally {
  for (const child of children) child.kill();
}
console.log(failures === 0 ? "all checks passed" : `${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
