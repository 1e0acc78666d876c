// Headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core) against a running
// sandrun stack: generated files as a browser sees them (DESIGN.md §2).
//
//   node tests/browser/check_artifacts.mjs CASES.json
//
// CASES.json is written by tests/integration/browser_test.cc, which also runs the programs
// that generate the files and copies index.html to the stack's test pages:
//   { "page": URL of index.html, "marker": path a generated script would fetch,
//     "control": URL of a page that runs the same script with nothing stopping it,
//     "image": {"url", "name"},
//     "downloads": [{"kind", "url", "name", "sha256"}],
//     "scripted": [{"kind", "url"}],            generated HTML/SVG with script in them
//     "expired": {"url"}, "tampered": {"url"} }
// Prints one "PASS <check>" or "FAIL <check>: <why>" line per check and one
// "HEADERS <kind> <json>" line per kind of file, and exits 1 if any check failed.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { chromium } from 'playwright-core';

const kOverallTimeoutMs = 100_000;
const kStepTimeoutMs = 15_000;
// After a generated script had its chance to run: long enough for a fetch to be sent.
const kSettleMs = 1_500;

const failures = [];
function pass(check) {
  console.log(`PASS ${check}`);
}
function fail(check, why) {
  failures.push(check);
  console.log(`FAIL ${check}: ${why}`);
}
function expect(check, ok, why) {
  if (ok) pass(check);
  else fail(check, why);
}

const kHeaderNames = [
  'content-type',
  'content-disposition',
  'x-content-type-options',
  'content-security-policy',
  'referrer-policy',
];

// The headers of `url` as the page's own fetch sees them (same origin: all are visible).
async function headersSeenByPage(page, url) {
  return page.evaluate(
    async ({ url, names }) => {
      const response = await fetch(url, { cache: 'no-store' });
      const out = { status: response.status };
      for (const name of names) out[name] = response.headers.get(name);
      return out;
    },
    { url, names: kHeaderNames },
  );
}

async function addElement(page, tag, attributes) {
  await page.evaluate(
    ({ tag, attributes }) => {
      const element = document.createElement(tag);
      for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
      element.textContent = tag === 'a' ? attributes.id : '';
      document.getElementById('area').appendChild(element);
      document.getElementById('area').appendChild(document.createElement('br'));
    },
    { tag, attributes },
  );
}

async function checkImage(page, image) {
  await addElement(page, 'img', { id: 'image', src: image.url, alt: image.name });
  await page.waitForFunction(() => document.getElementById('image').complete, null, {
    timeout: kStepTimeoutMs,
  });
  const width = await page.evaluate(() => document.getElementById('image').naturalWidth);
  expect('image renders inline (naturalWidth > 0)', width > 0, `naturalWidth ${width}`);
}

async function checkDownload(page, file, index) {
  const id = `download-${index}`;
  await addElement(page, 'a', { id, href: file.url });
  const [download] = await Promise.all([
    page.waitForEvent('download', { timeout: kStepTimeoutMs }),
    page.click(`#${id}`),
  ]);
  const saved = await download.path();
  const bytes = fs.readFileSync(saved);
  const sha256 = crypto.createHash('sha256').update(bytes).digest('hex');
  expect(`${file.kind} downloads with the right bytes`, sha256 === file.sha256,
         `sha256 ${sha256}, expected ${file.sha256} (${bytes.length} bytes)`);
  expect(`${file.kind} downloads under its own name`, download.suggestedFilename() === file.name,
         `suggested '${download.suggestedFilename()}', expected '${file.name}'`);
  expect(`${file.kind} download leaves the page in place`, page.url() === kCases.page,
         `page is now at ${page.url()}`);
}

// Gives a generated HTML/SVG file every chance to run its script: a click on a link, an
// iframe, a top-level navigation in a new tab. None may reach the marker or post a message.
async function checkScriptDoesNotRun(context, page, file, scriptRequests) {
  const before = scriptRequests.length;
  const id = `scripted-${file.kind}`;
  await addElement(page, 'a', { id, href: file.url });
  const download = page.waitForEvent('download', { timeout: kStepTimeoutMs }).catch(() => null);
  await page.click(`#${id}`);
  expect(`${file.kind} is saved, not opened, when its link is clicked`, (await download) !== null,
         'no download started');
  await addElement(page, 'iframe', { id: `frame-${file.kind}`, src: file.url });
  const tab = await context.newPage();
  let navigation = 'no error';
  try {
    const response = await tab.goto(file.url, { timeout: kStepTimeoutMs });
    navigation = `rendered with status ${response && response.status()}`;
  } catch (error) {
    // "Download is starting": the browser saves the file instead of showing it.
    navigation = String(error.message).split('\n')[0];
  }
  await page.waitForTimeout(kSettleMs);
  const title = await tab.title().catch(() => '');
  await tab.close();
  console.log(`INFO ${file.kind} top-level navigation: ${navigation}`);
  const ran = scriptRequests.slice(before);
  expect(`${file.kind} script never runs`, ran.length === 0 && title !== 'ran',
         `script requests: ${JSON.stringify(ran)}, tab title '${title}'`);
  const messages = await page.evaluate(() => window.sandrunMessages.slice());
  expect(`${file.kind} script posts no message to the page`, messages.length === 0,
         JSON.stringify(messages));
}

async function checkErrorPage(page, check, url, status, code) {
  const response = await page.goto(url, { timeout: kStepTimeoutMs });
  const body = response ? await response.text() : '';
  let parsed = null;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = null;
  }
  expect(check, response && response.status() === status && parsed?.error?.code === code,
         `status ${response && response.status()}, body ${body.slice(0, 200)}`);
}

const kCases = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));

async function main() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'sandrun-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.SANDRUN_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    acceptDownloads: true,
    // As root on a machine without a display or network: no Chromium sandbox (the machine's
    // root cannot use it), and none of the background connections that would only fail.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  try {
    const scriptRequests = [];
    context.on('request', (request) => {
      if (request.url().includes(kCases.marker)) scriptRequests.push(request.url());
    });
    const page = await context.newPage();
    page.setDefaultTimeout(kStepTimeoutMs);

    // The detection works: the same script, on a page that lets it run, is seen.
    await page.goto(kCases.control);
    await page.waitForTimeout(kSettleMs);
    expect('control: a script that runs is detected', scriptRequests.length > 0,
           'the control page\'s script was not seen; the checks below would prove nothing');
    scriptRequests.length = 0;

    await page.goto(kCases.page);
    const kinds = [kCases.image, ...kCases.downloads, ...kCases.scripted];
    for (const file of kinds) {
      const kind = file.kind || 'png';
      console.log(`HEADERS ${kind} ${JSON.stringify(await headersSeenByPage(page, file.url))}`);
    }
    await checkImage(page, kCases.image);
    for (const [index, file] of kCases.downloads.entries()) await checkDownload(page, file, index);
    for (const file of kCases.scripted) {
      await checkScriptDoesNotRun(context, page, file, scriptRequests);
    }
    console.log(`HEADERS expired ${JSON.stringify(await headersSeenByPage(page, kCases.expired.url))}`);
    await checkErrorPage(page, 'expired link shows 410', kCases.expired.url, 410, 'link_expired');
    await checkErrorPage(page, 'tampered link shows 403', kCases.tampered.url, 403, 'forbidden');
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

const timer = setTimeout(() => {
  console.log(`FAIL overall: not done within ${kOverallTimeoutMs} ms`);
  process.exit(2);
}, kOverallTimeoutMs);
try {
  await main();
} catch (error) {
  fail('no exception', error && error.stack ? error.stack : String(error));
}
clearTimeout(timer);
console.log(`${failures.length === 0 ? 'ALL PASSED' : `${failures.length} FAILED`}`);
process.exit(failures.length === 0 ? 0 : 1);
