import { describe, expect, it } from 'vitest';
import { waitFor } from './helpers/app.ts';
import { pdfText, TEST_CHROMIUM } from './helpers/pdf.ts';
import { freePort } from './helpers/ports.ts';
import { startCli } from './helpers/process.ts';

/** Issue #12: `postwright pdf-renderer` serves the bundled renderer alone, without a database. */
describe('postwright pdf-renderer', () => {
  it('serves Gotenberg routes on HOST:PORT and stops cleanly on SIGTERM', async () => {
    const port = await freePort();
    const cli = startCli(['pdf-renderer'], {
      HOST: '127.0.0.1',
      PORT: String(port),
      CHROMIUM_PATH: TEST_CHROMIUM,
      DATA_DIR: 'memory://',
    });
    try {
      await cli.waitForOutput(/PDF renderer listening on http:\/\/127\.0\.0\.1:\d+/, 30_000);
      expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
      const form = new FormData();
      form.append('files', new Blob(['<h1>From the command</h1>'], { type: 'text/html' }), 'index.html');
      const response = await fetch(`http://127.0.0.1:${port}/forms/chromium/convert/html`, {
        method: 'POST',
        body: form,
      });
      expect(response.status).toBe(200);
      expect(await pdfText(Buffer.from(await response.arrayBuffer()))).toContain('From the command');
    } finally {
      expect(await cli.stop('SIGTERM')).toBe(0);
    }
  });

  it('exits 1 naming CHROMIUM_PATH when Chromium is not there', async () => {
    const cli = startCli(['pdf-renderer'], { CHROMIUM_PATH: '/nonexistent/chromium', DATA_DIR: 'memory://' });
    await cli.waitForOutput(/Chromium not found at CHROMIUM_PATH/, 30_000);
    expect(await waitFor(async () => cli.child.exitCode ?? undefined, 30_000, 'the exit')).toBe(1);
  });
});
