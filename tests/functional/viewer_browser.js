// Drives `ableaudit view` in headless Chromium (playwright-core driving Debian's /usr/bin/chromium)
// and prints one JSON object: per page, the axe-core violations, requests that left the viewer,
// console errors, landmarks, the skip link from the keyboard and sideways scrolling at 200 % zoom;
// then three tasks done from the keyboard alone: filtering the pairs, comparing two runs, and
// rating two answers blind.
// Usage: node viewer_browser.js BASE_URL SCREENSHOT_DIR CHROMIUM PAGES_JSON [pages-only]
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const AXE_SOURCE = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

function watch(page, base, log) {
  page.on("request", (req) => {
    const url = req.url();
    if (!url.startsWith(base) && !url.startsWith("data:")) log.requests.push(url);
  });
  page.on("console", (msg) => { if (msg.type() === "error") log.consoleErrors.push(msg.text()); });
  page.on("pageerror", (err) => log.consoleErrors.push(String(err)));
}

async function audit(page) {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
    }));
  });
}

function shotName(address) {
  return address.replace(/^\//, "").replace(/[^a-zA-Z0-9.]+/g, "_") || "home";
}

async function check(context, base, address, shots) {
  const page = await context.newPage();
  const log = { requests: [], consoleErrors: [] };
  watch(page, base, log);
  await page.setViewportSize({ width: 1280, height: 900 });
  const response = await page.goto(base + address, { waitUntil: "load" });
  const axe = await audit(page);
  const landmarks = await page.evaluate(() => ({
    lang: document.documentElement.lang,
    main: document.querySelectorAll("main").length,
    h1: document.querySelectorAll("h1").length,
    scripts: document.querySelectorAll("script:not([type='application/json'])").length,
  }));
  await page.keyboard.press("Tab");
  const firstFocus = await page.evaluate(() => document.activeElement && document.activeElement.className);
  await page.keyboard.press("Enter");
  const afterSkip = await page.evaluate(() => document.activeElement && document.activeElement.id);
  await page.screenshot({ path: path.join(shots, shotName(address) + ".png"), fullPage: false });
  await page.setViewportSize({ width: 640, height: 900 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  await page.close();
  return { page: address, status: response.status(), axe, ...log, landmarks, firstFocus, afterSkip, overflow };
}

async function focusedTag(page) {
  return page.evaluate(() => {
    const el = document.activeElement;
    return el ? `${el.tagName.toLowerCase()}#${el.id || ""}:${el.getAttribute("name") || el.textContent.trim()}` : "";
  });
}

async function tabTo(page, predicate, limit = 80) {
  // Tab until the focused element matches: a task done with the keyboard alone
  const seen = [];
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press("Tab");
    const tag = await focusedTag(page);
    if (predicate(tag)) return tag;
    seen.push(tag);
  }
  throw new Error(`no element matched after ${limit} Tabs on ${page.url()}: ${seen.join(" | ")}`);
}

async function filterTask(context, base, shots) {
  const page = await context.newPage();
  await page.goto(base + "/pairs", { waitUntil: "load" });
  const before = await page.evaluate(() => document.querySelectorAll("article.pair").length);
  const total = await page.textContent("#result-count");
  // choose a model and a disability with the arrow keys, type a word, press Enter
  await tabTo(page, (t) => t.startsWith("select#f-model"));
  await page.keyboard.press("ArrowDown");  // the first model
  await tabTo(page, (t) => t.startsWith("select#f-disability"));
  await page.keyboard.press("ArrowDown");  // the first disability
  await tabTo(page, (t) => t.startsWith("input#f-q"));
  await page.keyboard.type("sadly");
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.keyboard.press("Enter")]);
  const result = await page.evaluate(() => ({
    url: location.search,
    count: document.getElementById("result-count").textContent,
    headings: Array.from(document.querySelectorAll("article.pair h2")).map((h) => h.textContent),
    answers: Array.from(document.querySelectorAll("article.pair .answer")).map((p) => p.textContent),
  }));
  const axe = await audit(page);
  await page.screenshot({ path: path.join(shots, "task-filter.png"), fullPage: true });
  await page.close();
  return { before, total, ...result, axe };
}

async function compareTask(context, base, shots) {
  const page = await context.newPage();
  await page.goto(base + "/compare", { waitUntil: "load" });
  // the default sides are the last two runs of one model; change the metric, then Compare
  await tabTo(page, (t) => t.startsWith("select#c-metric"));
  await page.keyboard.type("judge_score:j1");  // the select's type-ahead picks the judge's score
  await tabTo(page, (t) => t.startsWith("button#:Compare"));
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.keyboard.press("Enter")]);
  const result = await page.evaluate(() => ({
    url: location.search,
    summary: Object.fromEntries(Array.from(document.querySelectorAll(".data-statement div")).map(
      (d) => [d.querySelector("dt").textContent, d.querySelector("dd").textContent])),
    pairs: document.querySelectorAll("article.pair").length,
    captions: Array.from(document.querySelectorAll("article.pair caption")).map((c) => c.textContent),
    sides: Array.from(document.querySelectorAll("article.pair .side h3")).map((h) => h.textContent),
  }));
  const axe = await audit(page);
  await page.screenshot({ path: path.join(shots, "task-compare.png"), fullPage: false });
  await page.close();
  return { ...result, axe };
}

async function rateOne(page, annotator, score, shots, n) {
  // on a rating page: annotator id, a score chosen with the arrow keys, submit with Enter
  const shown = await page.evaluate(() => document.querySelector("main").textContent);
  const item = await page.inputValue("input[name=item]");
  const axe = await audit(page);
  await tabTo(page, (t) => t.startsWith("input#annotator"));
  await page.keyboard.press("Control+A");
  await page.keyboard.type(annotator);
  await tabTo(page, (t) => t.startsWith("input#judge_score-1"));
  await page.keyboard.press("Space");
  for (let i = 1; i < score; i++) await page.keyboard.press("ArrowRight");
  await tabTo(page, (t) => t.startsWith("button#:Land the rating"));
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.keyboard.press("Enter")]);
  const landing = await page.evaluate(() => {
    const el = document.getElementById("landing-id");
    return el ? el.textContent : null;
  });
  await page.screenshot({ path: path.join(shots, `task-rated-${n}.png`), fullPage: false });
  return { item, landing, shown, axe, ratedAxe: await audit(page) };
}

async function rateTask(context, base, shots, annotator) {
  const page = await context.newPage();
  await page.goto(base + "/", { waitUntil: "load" });
  // the viewer's menu leads to a blind rating
  await tabTo(page, (t) => t.startsWith("a#:Rate blind"));
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.keyboard.press("Enter")]);
  const first = await rateOne(page, annotator, 6, shots, 1);
  await tabTo(page, (t) => t.startsWith("a#:Rate the next answer"));
  await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.keyboard.press("Enter")]);
  const second = await rateOne(page, annotator, 3, shots, 2);
  await page.close();
  return [first, second];
}

async function main() {
  const [base, shots, executable, pagesJson, only] = process.argv.slice(2);
  const addresses = JSON.parse(pagesJson);
  fs.mkdirSync(shots, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "viewer-browser-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: executable || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const out = { pages: [] };
  try {
    for (const address of addresses) out.pages.push(await check(context, base, address, shots));
    if (only === "pages-only") return;
    out.filter = await filterTask(context, base, shots);
    out.compare = await compareTask(context, base, shots);
    out.ratings = await rateTask(context, base, shots, "browser-rater");
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
    process.stdout.write(JSON.stringify(out));
  }
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + "\n"); process.exit(1); });
