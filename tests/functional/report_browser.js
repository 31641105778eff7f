// Opens every page of a rendered report from disk in headless Chromium (playwright-core driving
// Debian's /usr/bin/chromium) and prints one JSON object: per page, the axe-core violations, the
// requests that left the file, console errors, the section ids present, a keyboard check, the tables
// at a 1366 pixel wide window, and a reflow check at 640 CSS pixels (200 % zoom of 1280 pixels).
// Usage: node report_browser.js REPORT_DIR SCREENSHOT_DIR [CHROMIUM]
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const AXE_SOURCE = fs.readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

function pagesOf(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...pagesOf(full));
    else if (entry.name.endsWith(".html")) out.push(full);
  }
  return out.sort();
}

async function check(context, file, reportDir, shots) {
  const page = await context.newPage();
  const requests = [];
  const consoleErrors = [];
  const fileUrl = "file://" + file;
  page.on("request", (req) => {
    const url = req.url().split("#")[0];
    if (url !== fileUrl && !url.startsWith("data:")) requests.push(req.url());
  });
  page.on("console", (msg) => { if (msg.type() === "error") consoleErrors.push(msg.text()); });
  page.on("pageerror", (err) => consoleErrors.push(String(err)));
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(fileUrl, { waitUntil: "load" });
  await page.evaluate(AXE_SOURCE);
  const axe = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({
      id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
    }));
  });
  const sections = await page.evaluate(() => Array.from(document.querySelectorAll("main section[id]")).map((s) => s.id));
  const landmarks = await page.evaluate(() => ({
    lang: document.documentElement.lang,
    main: document.querySelectorAll("main").length,
    nav: document.querySelectorAll("nav").length,
    h1: document.querySelectorAll("h1").length,
  }));
  // keyboard: the first Tab reaches the skip link, Enter moves focus into main
  await page.keyboard.press("Tab");
  const firstFocus = await page.evaluate(() => document.activeElement && document.activeElement.className);
  await page.keyboard.press("Enter");
  const afterSkip = await page.evaluate(() => document.activeElement && document.activeElement.id);
  const rel = path.relative(reportDir, file);
  const name = rel.replace(/[^a-zA-Z0-9.]+/g, "_");
  await page.screenshot({ path: path.join(shots, name + ".png"), fullPage: false });
  // a laptop window (1366 x 768): the page never scrolls sideways, and each table either fits its
  // region or scrolls inside it (a focusable region with a name), its last column header reachable
  await page.setViewportSize({ width: 1366, height: 768 });
  const wide = await page.evaluate(() => {
    const tables = Array.from(document.querySelectorAll("main .table-wrap")).map((wrap) => {
      const headers = wrap.querySelectorAll("thead tr:last-child th");
      const last = headers[headers.length - 1];
      const style = getComputedStyle(wrap);
      const label = document.getElementById(wrap.getAttribute("aria-labelledby") || "");
      wrap.scrollLeft = wrap.scrollWidth;
      const box = wrap.getBoundingClientRect();
      const end = last ? last.getBoundingClientRect() : box;
      const reachable = end.right <= box.right + 1 && end.left >= box.left - 1;
      wrap.scrollLeft = 0;
      return {
        columns: headers.length,
        fits: wrap.scrollWidth <= wrap.clientWidth,
        scrolls: ["auto", "scroll"].includes(style.overflowX),
        focusable: wrap.tabIndex === 0,
        named: wrap.getAttribute("role") === "region" && !!(label && label.textContent.trim()),
        reachable,
        inside: box.right <= document.documentElement.clientWidth + 1,
      };
    });
    return {
      overflow: document.documentElement.scrollWidth - 1366,
      tables,
    };
  });
  // reflow: at 640 CSS pixels (200 % zoom of a 1280 pixel window) the page itself never scrolls sideways;
  // wide data tables scroll inside their own region, which WCAG 1.4.10 allows for tables
  await page.setViewportSize({ width: 640, height: 900 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  await page.screenshot({ path: path.join(shots, name + ".zoom200.png"), fullPage: false });
  const result = { page: rel, axe, requests, consoleErrors, sections, landmarks, firstFocus, afterSkip, overflow, wide };
  if (rel.startsWith("evidence" + path.sep)) result.filter = await filterCheck(page, fileUrl, shots, name);
  await page.close();
  return result;
}

async function filterCheck(page, fileUrl, shots, name) {
  // a cell's address opens the page filtered; typing in the search box filters from the keyboard alone
  await page.setViewportSize({ width: 1280, height: 900 });
  const disability = await page.evaluate(() => {
    const first = document.querySelector("article.pair");
    return first ? first.dataset.disability : null;
  });
  if (!disability) return { pairs: 0 };
  await page.goto(fileUrl + "#disability=" + encodeURIComponent(disability), { waitUntil: "load" });
  const byAddress = await page.evaluate((d) => {
    const all = Array.from(document.querySelectorAll("article.pair"));
    return {
      pairs: all.length,
      visible: all.filter((a) => !a.hidden).length,
      expected: all.filter((a) => a.dataset.disability === d).length,
      selected: document.getElementById("f-disability").value,
      status: document.getElementById("filter-status").textContent,
      formVisible: !document.getElementById("filters").hidden,
    };
  }, disability);
  // a shaded cell's address names its metric and outcome: only the pairs of the slice it counts show
  const degraded = await page.evaluate(() => {
    const pair = Array.from(document.querySelectorAll("article.pair")).find((a) => / degraded:/.test(" " + a.dataset.outcomes));
    if (!pair) return null;
    const token = (" " + pair.dataset.outcomes).split(" degraded:")[1].split(" ")[0];
    return { disability: pair.dataset.disability, metric: token };
  });
  let byMetric = null;
  if (degraded) {
    const params = new URLSearchParams({ disability: degraded.disability, metric: degraded.metric, outcome: "degraded" });
    await page.goto(fileUrl + "#" + params.toString(), { waitUntil: "load" });
    byMetric = await page.evaluate((want) => {
      const all = Array.from(document.querySelectorAll("article.pair"));
      const token = "degraded:" + want.metric;
      return {
        visible: all.filter((a) => !a.hidden).length,
        expected: all.filter((a) => a.dataset.disability === want.disability && a.dataset.outcomes.split(" ").includes(token)).length,
        ofSlice: all.filter((a) => a.dataset.disability === want.disability).length,
        selected: document.getElementById("f-outcome").value,
        token,
      };
    }, degraded);
  }
  await page.focus("#f-q");
  await page.keyboard.type("zzzz-no-such-text");
  const afterTyping = await page.evaluate(() => Array.from(document.querySelectorAll("article.pair")).filter((a) => !a.hidden).length);
  await page.focus("button[type=reset]");
  await page.keyboard.press("Enter");
  await page.waitForTimeout(50);
  const afterReset = await page.evaluate(() => Array.from(document.querySelectorAll("article.pair")).filter((a) => !a.hidden).length);
  await page.screenshot({ path: path.join(shots, name + ".filtered.png"), fullPage: false });
  const marks = await page.evaluate(() => document.querySelectorAll("article.pair mark").length);
  return { ...byAddress, afterTyping, afterReset, marks, byMetric };
}

async function main() {
  const [reportDir, shots, executable] = process.argv.slice(2);
  fs.mkdirSync(shots, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "report-browser-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: executable || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
  });
  const results = [];
  try {
    for (const file of pagesOf(path.resolve(reportDir))) {
      results.push(await check(context, file, path.resolve(reportDir), shots));
    }
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(results));
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + "\n"); process.exit(1); });
