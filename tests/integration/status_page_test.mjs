// Integration: the status page at GET / in headless Chromium (Debian's, driven by playwright-core).
//
// A router in front of two kvrouter-mockers that publish KV events and one worker that is not
// there. The page must show the set and its three workers (two up, one down) from its JSON
// endpoint, with no request leaving the router's origin; update itself while traffic runs (the
// routed count, the hit rate of prompts sent twice, the request-rate chart) without a reload;
// render operators' names as text, never as HTML; and say so when the router goes away. The
// screenshot is decoded and its pixels checked: the green and red health dots and the chart's
// line are drawn.
//
//   node tests/integration/status_page_test.mjs PATH/TO/kvrouter PATH/TO/kvrouter-mocker
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inflateSync } from "node:zlib";
import { chromium } from "playwright-core";

const [kvrouter, mocker] = process.argv.slice(2);
const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let failures = 0;
function check(condition, what) {
  console.log(`${condition ? "ok  " : "FAIL"} ${what}`);
  if (!condition) failures++;
}

function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startMocker(kvPort) {
  const portFile = join(mkdtempSync(join(tmpdir(), "kvr-")), "port");
  children.push(spawn(mocker, ["--port", "0", "--port-file", portFile, "--model", "m", "--kv-events-endpoint",
                               `tcp://*:${kvPort}`], { stdio: "ignore" }));
  for (let i = 0; i < 400 && !existsSync(portFile); i++) await sleep(25);
  return Number(readFileSync(portFile, "utf8"));
}

function startRouter(args) {
  return new Promise((resolve, reject) => {
    const router = spawn(kvrouter, ["--host", "127.0.0.1", "--port", "0", "--threads", "1", ...args]);
    children.push(router);
    let seen = "";
    router.stderr.on("data", (data) => {
      seen += data;
      const match = seen.match(/serving .* on http:\/\/[^:]+:(\d+)/);
      if (match) resolve({ port: Number(match[1]), process: router });
    });
    router.on("exit", (code) => reject(new Error(`kvrouter exited with ${code}: ${seen}`)));
  });
}

/// The RGB pixels of a PNG (8-bit RGB or RGBA, not interlaced), as Chromium writes screenshots.
function decodePng(png) {
  let offset = 8;
  let width = 0, height = 0, channels = 0;
  const data = [];
  while (offset < png.length) {
    const length = png.readUInt32BE(offset);
    const type = png.toString("ascii", offset + 4, offset + 8);
    const body = png.subarray(offset + 8, offset + 8 + length);
    if (type === "IHDR") {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      if (body[8] !== 8 || body[12] !== 0) throw new Error("only 8-bit, non-interlaced PNGs");
      channels = { 2: 3, 6: 4 }[body[9]];
    } else if (type === "IDAT") {
      data.push(body);
    }
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const pixels = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const value = raw[y * (stride + 1) + 1 + x];
      const a = x >= channels ? pixels[y * stride + x - channels] : 0;
      const b = y > 0 ? pixels[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? pixels[(y - 1) * stride + x - channels] : 0;
      const paeth = () => {
        const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      };
      const predicted = [0, a, b, (a + b) >> 1, paeth()][filter];
      pixels[y * stride + x] = (value + predicted) & 0xff;
    }
  }
  return { width, height, channels, pixels };
}

function countColour(image, [r, g, b], tolerance = 12) {
  let n = 0;
  for (let i = 0; i < image.pixels.length; i += image.channels)
    if (Math.abs(image.pixels[i] - r) <= tolerance && Math.abs(image.pixels[i + 1] - g) <= tolerance &&
        Math.abs(image.pixels[i + 2] - b) <= tolerance) n++;
  return n;
}

async function complete(port, prompt) {
  const answer = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "m", prompt, max_tokens: 2 }) });
  await answer.text();
  return answer.status;
}

let browser;
try {
  const kvPorts = [await freePort(), await freePort()];
  const mockers = [await startMocker(kvPorts[0]), await startMocker(kvPorts[1])];
  const oddName = "<i>odd</i>";
  const router = await startRouter([
    "--model", "m", "--health-interval-ms", "200",
    "--worker", `http://127.0.0.1:${mockers[0]},id=m0,kv_events=tcp://127.0.0.1:${kvPorts[0]}`,
    "--worker", `http://127.0.0.1:${mockers[1]},id=${oddName},kv_events=tcp://127.0.0.1:${kvPorts[1]}`,
    "--worker", `http://127.0.0.1:${await freePort()},id=gone`]);
  const origin = `http://127.0.0.1:${router.port}`;

  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"] });
  const page = await browser.newPage({ viewport: { width: 1100, height: 640 } });
  const requested = [];
  page.on("request", (request) => requested.push(request.url()));
  await page.goto(`${origin}/`);
  await page.waitForSelector('[data-worker="gone"][data-state="down"]', { timeout: 10000 });
  const states = await page.$$eval("[data-worker]", (rows) => rows.map((r) => [r.dataset.worker, r.dataset.state]));
  check(JSON.stringify(states) === JSON.stringify([["m0", "up"], [oddName, "up"], ["gone", "down"]]),
        `the page lists the set's workers with their health (${JSON.stringify(states)})`);
  check(await page.textContent('[data-set="m"] [data-figure="healthy"] .value') === "2 / 3", "and counts the healthy ones");
  const oddCell = await page.$eval(`[data-worker="${oddName}"] td:nth-child(2)`, (td) => [td.textContent, td.children.length]);
  check(oddCell[0] === oddName && oddCell[1] === 0, `a worker named like HTML is shown as text (${JSON.stringify(oddCell)})`);

  // Traffic while the page is open: every prompt twice, so the second finds its blocks cached.
  const statuses = [];
  for (let i = 0; i < 15; i++) {
    const prompt = Array.from({ length: 64 }, (_, t) => 1000 * (i + 1) + t);
    statuses.push(await complete(router.port, prompt));
    await sleep(150);
    statuses.push(await complete(router.port, prompt));
  }
  check(statuses.every((s) => s === 200), `the 30 requests were served (${[...new Set(statuses)]})`);
  const routedShown = async () => page.textContent('[data-set="m"] [data-figure="routed"] .value');
  const refreshesBefore = await page.evaluate(() => Number(document.body.dataset.refreshes));
  for (let i = 0; i < 40 && (await routedShown()) !== "30"; i++) await sleep(100);
  check(await routedShown() === "30", `the routed count follows the traffic without a reload (${await routedShown()})`);
  // Three samples at least: two may both show the burst's rate, a flat line a couple of pixels
  // long; the one after the burst shows the rate falling.
  await page.waitForFunction(() => {
    const line = document.querySelector('[data-chart="rps"] polyline');
    return line !== null && line.getAttribute("points").trim().split(/\s+/).length >= 3;
  }, null, { timeout: 8000 });
  const hitRate = await page.textContent('[data-set="m"] [data-figure="hit_rate"] .value');
  check(/^\d+\.\d%$/.test(hitRate) && parseFloat(hitRate) > 20,
        `the hit rate of prompts sent twice is shown (${hitRate})`);
  const routedCells = await page.$$eval('[data-field="routed"]', (cells) => cells.map((c) => Number(c.textContent)));
  check(routedCells[0] + routedCells[1] === 30 && routedCells[2] === 0,
        `per-worker routed counts add up, none to the down worker (${routedCells})`);
  check(await page.evaluate(() => Number(document.body.dataset.refreshes)) > refreshesBefore, "the page refreshed itself");
  const paths = [...new Set(requested.map((u) => new URL(u).pathname))];
  check(requested.length > 0 && requested.every((url) => url.startsWith(origin + "/")) &&
        paths.every((p) => p === "/" || p === "/v1/router/status"),
        `the page asks the router for itself and its data only, nothing a worker would be sent (${paths})`);

  const image = decodePng(await page.screenshot());
  const green = countColour(image, [0x1f, 0x9d, 0x55]);
  const red = countColour(image, [0xd6, 0x45, 0x45]);
  const line = countColour(image, [0x2f, 0x6f, 0xd6]);
  check(image.width === 1100 && image.height === 640, `the screenshot is the viewport (${image.width}x${image.height})`);
  check(green >= 2 * 100 && red >= 100, `it shows two green health dots and a red one (${green} / ${red} pixels)`);
  check(line >= 20, `and the request-rate line (${line} pixels)`);

  router.process.kill("SIGKILL");
  const banner = await page.waitForSelector("#banner.shown", { timeout: 8000 }).then(() => true, () => false);
  check(banner, "when the router is gone the page says it cannot reach it");

  // With API keys on, the page asks for the admin key once and sends it as a bearer token.
  const guarded = await startRouter(["--model", "m", "--worker", `http://127.0.0.1:${mockers[0]},id=m0`,
                                     "--api-key", "sk-user", "--admin-api-key", "sk-admin"]);
  const keyed = await browser.newPage();
  await keyed.goto(`http://127.0.0.1:${guarded.port}/`);
  await keyed.waitForSelector("#key-form.shown", { timeout: 8000 });
  check(await keyed.$$eval("[data-worker]", (rows) => rows.length) === 0, "behind API keys the page shows no data without a key");
  await keyed.fill("#key", "sk-user");
  await keyed.click("#key-form button");
  await keyed.waitForFunction(() => document.getElementById("key-refused").textContent !== "", null, { timeout: 8000 });
  check(await keyed.textContent("#key-refused") === "that key was refused", "an API key that is not an admin key is refused");
  await keyed.fill("#key", "sk-admin");
  await keyed.click("#key-form button");
  await keyed.waitForSelector('[data-worker="m0"]', { timeout: 8000 });
  check(!(await keyed.$eval("#key-form", (form) => form.classList.contains("shown"))),
        "with the admin key the page shows the set and hides the form");
} catch (e) {
  console.log(`FAIL ${e.stack}`);
  failures++;
} finally {
  if (browser) await browser.close();
  for (const child of children) child.kill("SIGKILL");
}
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
