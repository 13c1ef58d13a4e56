/**
 * PDF benchmark (issue #12): PDFs per second through the bundled renderer service — the
 * Gotenberg HTTP client (multipart upload, download) → `postwright pdf-renderer`'s server → its
 * Chromium page pool (JavaScript off, requests intercepted) — next to raw puppeteer-core
 * `page.setContent` + `page.pdf` on the same number of reused pages of one browser, in the same run.
 * Target: the service ≥ 80 % of raw. The sides take BENCH_TURNS turns (default 6) of BENCH_SECONDS
 * (default 4) each, alternating which goes first (raw-service, service-raw, …) so that the shared
 * machine's drifting load falls on both alike, after a warm-up; the figures are the totals.
 *
 * The document is a sample EmailBuilder.js design rendered with variables and the print CSS, as a
 * PDF attachment is. Chromium from CHROMIUM_PATH (default /usr/bin/chromium); pages from
 * PDF_RENDERER_PAGES (default 2); requests in flight: 2 × pages for both sides.
 *
 * Run: npm run bench:pdf
 */
import { cpus, loadavg } from 'node:os';
import puppeteer, { type Browser } from 'puppeteer-core';
import { GotenbergClient, paperOf, printableHtml } from '../server/src/modules/pdf/index.ts';
import { startPdfRenderer } from '../server/src/modules/pdf/renderer/renderer.server.ts';
import { renderTemplateHtml } from '../server/src/modules/rendering/index.ts';
import { loadFixtures } from '../server/src/modules/rendering/rendering.factories.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const TURNS = Number(process.env.BENCH_TURNS ?? 6);
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const PAGES = Number(process.env.PDF_RENDERER_PAGES ?? 2);
const IN_FLIGHT = 2 * PAGES;
const PAPER = paperOf({ PDF_PAPER_SIZE: 'A4', PDF_MARGIN_MM: 15 });

/** Runs `render` with IN_FLIGHT workers for `seconds`; returns PDFs made and elapsed ms. */
async function run(seconds: number, render: () => Promise<Buffer>): Promise<{ count: number; ms: number }> {
  let count = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (performance.now() < until) {
        const pdf = await render();
        if (pdf.subarray(0, 5).toString() !== '%PDF-') throw new Error('not a PDF');
        count++;
      }
    }),
  );
  return { count, ms: performance.now() - started };
}

/** Raw puppeteer: one browser, PAGES reused pages, setContent + pdf, no HTTP service in between. */
async function rawRenderer(
  html: string,
): Promise<{ render: () => Promise<Buffer>; close: () => Promise<void> }> {
  const browser: Browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    pipe: true, // as the service's pool
    args: [...(process.getuid?.() === 0 ? ['--no-sandbox'] : []), '--disable-dev-shm-usage', '--disable-gpu'],
  });
  // The same page settings as the service's pages (JavaScript off, every request but data: aborted),
  // so both sides do the same work in Chromium and the ratio is what the service itself costs.
  const free = await Promise.all(
    Array.from({ length: PAGES }, async () => {
      const page = await browser.newPage();
      await page.setJavaScriptEnabled(false);
      await page.setRequestInterception(true);
      page.on('request', (request) => {
        if (request.url().startsWith('data:') || request.url() === 'about:blank') void request.continue();
        else void request.abort('blockedbyclient');
      });
      return page;
    }),
  );
  const waiting: ((page: (typeof free)[number]) => void)[] = [];
  const acquire = () => {
    const page = free.pop();
    return page ? Promise.resolve(page) : new Promise<(typeof free)[number]>((r) => waiting.push(r));
  };
  const release = (page: (typeof free)[number]) => {
    const next = waiting.shift();
    if (next) next(page);
    else free.push(page);
  };
  const margin = `${PAPER.marginIn}in`;
  return {
    async render() {
      const page = await acquire();
      try {
        await page.setContent(html, { waitUntil: 'load' });
        return Buffer.from(
          await page.pdf({
            width: `${PAPER.widthIn}in`,
            height: `${PAPER.heightIn}in`,
            margin: { top: margin, bottom: margin, left: margin, right: margin },
            printBackground: true,
          }),
        );
      } finally {
        release(page);
      }
    },
    close: () => browser.close(),
  };
}

async function main(): Promise<void> {
  // The largest sample document (most blocks and images).
  const fixture = loadFixtures().sort(
    (a, b) => JSON.stringify(b.design).length - JSON.stringify(a.design).length,
  )[0];
  if (!fixture) throw new Error('No sample documents found (set EMAILBUILDER_FIXTURES)');
  const rendered = await renderTemplateHtml(
    { subject: 'Invoice {{ n }}', designJson: fixture.design },
    { first_name: 'Ada', n: 'A-1042' },
  );
  const html = printableHtml(rendered.html);
  console.log(
    `node ${process.version}, ${cpus().length} CPUs, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(
        ' ',
      )}; document "${fixture.name}" (${html.length} bytes of HTML); ${PAGES} pages, ${IN_FLIGHT} in flight, ${TURNS} × ${SECONDS} s per side`,
  );

  const service = await startPdfRenderer(
    { host: '127.0.0.1', port: 0 },
    {
      executablePath: CHROMIUM,
      pages: PAGES,
      renderTimeoutMs: 30_000,
      allowedImageHosts: [],
      idleCloseMs: 600_000,
    },
  );
  const client = new GotenbergClient({
    baseUrl: service.url,
    timeoutMs: 60_000,
    maxBytes: 10 * 1024 * 1024,
    paper: PAPER,
  });
  const raw = await rawRenderer(html);
  try {
    const viaService = () => client.renderPdf(html);
    // Warm-up: browsers started, pages created, JIT.
    await run(1, raw.render);
    await run(1, viaService);
    const totals = { raw: { count: 0, ms: 0 }, service: { count: 0, ms: 0 } };
    const sides = [
      ['raw', raw.render],
      ['service', viaService],
    ] as const;
    for (let turn = 1; turn <= TURNS; turn++) {
      for (const [name, render] of turn % 2 === 1 ? sides : [...sides].reverse()) {
        const result = await run(SECONDS, render);
        totals[name].count += result.count;
        totals[name].ms += result.ms;
        console.log(
          `turn ${turn} ${name.padEnd(8)} ${((result.count * 1000) / result.ms).toFixed(2).padStart(8)} PDFs/s  (${result.count} PDFs)`,
        );
      }
    }
    const rawRate = (totals.raw.count * 1000) / totals.raw.ms;
    const serviceRate = (totals.service.count * 1000) / totals.service.ms;
    console.log('');
    console.log(`raw puppeteer page.pdf   ${rawRate.toFixed(2)} PDFs/s`);
    console.log(`through the service      ${serviceRate.toFixed(2)} PDFs/s`);
    console.log(`service / raw            ${(serviceRate / rawRate).toFixed(2)} (target ≥ 0.80)`);
    console.log(
      `load average now: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    await raw.close();
    await service.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
