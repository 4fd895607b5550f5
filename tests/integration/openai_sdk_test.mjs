// Integration: the official `openai` npm SDK, a real client, runs chat completions through
// kvrouter to a fake worker, streaming and not; then embeddings and the Responses API (streamed
// and not), which kvrouter passes through, against a kvrouter-mocker.
//
//   node tests/integration/openai_sdk_test.mjs PATH/TO/kvrouter PATH/TO/kvrouter-mocker
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";

const here = dirname(fileURLToPath(import.meta.url));
const [kvrouter, mocker] = process.argv.slice(2);
const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startWorker(name) {
  const portFile = join(mkdtempSync(join(tmpdir(), "kvr-")), "port");
  children.push(spawn("/usr/bin/python3", [join(here, "fake_worker.py"), "--port-file", portFile, "--name", name,
                                           "--chunks", "4", "--chunk-delay", "0.05"], { stdio: "inherit" }));
  for (let i = 0; i < 200 && !existsSync(portFile); i++) await sleep(25);
  return Number(readFileSync(portFile, "utf8"));
}

async function startMocker() {
  const portFile = join(mkdtempSync(join(tmpdir(), "kvr-")), "port");
  children.push(spawn(mocker, ["--port", "0", "--port-file", portFile, "--model", "qwen3"], { stdio: "ignore" }));
  for (let i = 0; i < 200 && !existsSync(portFile); i++) await sleep(25);
  return Number(readFileSync(portFile, "utf8"));
}

function startRouter(workerPort, mode = "round-robin", extra = []) {
  return new Promise((resolve, reject) => {
    const router = spawn(kvrouter, ["--model", "qwen3", "--host", "127.0.0.1", "--port", "0", "--threads", "1",
                                    "--worker", `http://127.0.0.1:${workerPort},id=w0`, "--router-mode", mode, ...extra]);
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

  // Routes kvrouter passes through, against an engine that serves them.
  const mockerPort = await startMocker();
  const engine = new OpenAI({ baseURL: `http://127.0.0.1:${await startRouter(mockerPort, "kv")}/v1`,
                              apiKey: "not-needed", maxRetries: 0 });
  const embeddings = await engine.embeddings.create({ model: "qwen3", input: ["first", "second"] });
  check(embeddings.data.length === 2 && embeddings.data[1].embedding.length === 8 && embeddings.data[1].index === 1,
        `embeddings.create() through the router (${embeddings.data.length} vectors)`);
  const response = await engine.responses.create({ model: "qwen3", input: "Hello" });
  check(response.object === "response" && response.output_text === "mock response",
        `responses.create() through the router ("${response.output_text}")`);
  const events = await engine.responses.create({ model: "qwen3", input: "Hello", stream: true });
  let deltas = "";
  let completed = false;
  for await (const event of events) {
    if (event.type === "response.output_text.delta") deltas += event.delta;
    if (event.type === "response.completed") completed = true;
  }
  check(deltas === "mock response" && completed, `a streamed responses.create() yields its events ("${deltas}", completed: ${completed})`);

  // A router with an API key: the SDK's apiKey is the bearer token it checks.
  const guarded = await startRouter(mockerPort, "kv", ["--api-key", "sk-kvrouter-test"]);
  const keyed = new OpenAI({ baseURL: `http://127.0.0.1:${guarded}/v1`, apiKey: "sk-kvrouter-test", maxRetries: 0 });
  const keyedEmbeddings = await keyed.embeddings.create({ model: "qwen3", input: "x" });
  check(keyedEmbeddings.data.length === 1, "with the router's API key, embeddings.create() is served");
  const keyedResponse = await keyed.responses.create({ model: "qwen3", input: "Hello" });
  check(keyedResponse.output_text === "mock response", "and responses.create()");
  for (const [what, call] of [["embeddings.create()", (c) => c.embeddings.create({ model: "qwen3", input: "x" })],
                              ["responses.create()", (c) => c.responses.create({ model: "qwen3", input: "Hello" })]]) {
    try {
      await call(new OpenAI({ baseURL: `http://127.0.0.1:${guarded}/v1`, apiKey: "sk-wrong", maxRetries: 0 }));
      check(false, `${what} with a wrong key raises`);
    } catch (error) {
      check(error instanceof OpenAI.AuthenticationError && error.status === 401 && error.code === "invalid_api_key",
            `${what} with a wrong key raises the SDK's AuthenticationError (401 invalid_api_key)`);
    }
  }
} catch (error) {
  console.log(`FAIL ${error.stack ?? error}`);
  failures++;
} finally {
  for (const child of children) child.kill();
}
console.log(failures === 0 ? "all checks passed" : `${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
