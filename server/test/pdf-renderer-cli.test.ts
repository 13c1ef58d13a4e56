import { describe, expect, it } from 'vitest';
import { waitFor } from './helpers/app.ts';
import { pdfText, postHtmlForPdf, startRendererCli, TEST_CHROMIUM } from './helpers/pdf.ts';
import { freePort } from './helpers/ports.ts';
import { childPids, isAlive, startCli } from './helpers/process.ts';

/** Issue #12: `postwright pdf-renderer` serves the bundled renderer alone, without a database. */
describe('postwright pdf-renderer', () => {
  it('serves Gotenberg routes on HOST:PORT and stops cleanly on SIGTERM', async () => {
    const { cli, url } = await startRendererCli();
    try {
      expect(cli.output()).toMatch(/PDF renderer listening on http:\/\/127\.0\.0\.1:\d+/);
      expect((await fetch(`${url}/health`)).status).toBe(200);
      const response = await postHtmlForPdf(url, '<h1>From the command</h1>');
      expect(response.status).toBe(200);
      expect(await pdfText(Buffer.from(await response.arrayBuffer()))).toContain('From the command');
    } finally {
      expect(await cli.stop('SIGTERM')).toBe(0);
    }
  });

  it('leaves no Chromium behind when the renderer is killed with SIGKILL', async () => {
    const { cli, url } = await startRendererCli();
    expect((await postHtmlForPdf(url, '<p>x</p>')).status).toBe(200);
    const browsers = childPids(cli.child.pid!);
    expect(browsers.length).toBeGreaterThan(0);
    expect(await cli.stop('SIGKILL')).toBe(null);
    try {
      await waitFor(async () => (browsers.some(isAlive) ? undefined : true), 20_000, 'Chromium to exit');
    } finally {
      // Should the test fail, it leaves no orphaned browser behind either.
      for (const pid of browsers.filter(isAlive)) process.kill(pid, 'SIGKILL');
    }
  });

  it('exits 1 naming CHROMIUM_PATH when Chromium is not there', async () => {
    const cli = startCli(['pdf-renderer'], { CHROMIUM_PATH: '/nonexistent/chromium', DATA_DIR: 'memory://' });
    await cli.waitForOutput(/Chromium not found at CHROMIUM_PATH/, 30_000);
    expect(await waitFor(async () => cli.child.exitCode ?? undefined, 30_000, 'the exit')).toBe(1);
  });

  it('refuses to serve on a non-loopback HOST without credentials, naming the variables', async () => {
    const port = await freePort();
    const cli = startCli(['pdf-renderer'], {
      HOST: '0.0.0.0',
      PORT: String(port),
      CHROMIUM_PATH: TEST_CHROMIUM,
      DATA_DIR: 'memory://',
    });
    await cli.waitForOutput(/PDF_RENDERER_USERNAME and PDF_RENDERER_PASSWORD/, 30_000);
    expect(await waitFor(async () => cli.child.exitCode ?? undefined, 30_000, 'the exit')).toBe(1);
    await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
  });

  it('requires PDF_RENDERER_USERNAME/PASSWORD as HTTP Basic credentials when they are set', async () => {
    const { cli, url } = await startRendererCli({
      HOST: '0.0.0.0',
      PDF_RENDERER_USERNAME: 'pdf',
      PDF_RENDERER_PASSWORD: 'a-long-shared-secret',
    });
    try {
      expect(cli.output()).toMatch(/PDF renderer listening on .*credentials required/);
      expect(cli.output()).not.toContain('a-long-shared-secret');
      const post = (headers: Record<string, string>) =>
        postHtmlForPdf(url, '<h1>Behind a password</h1>', headers);
      expect((await post({})).status).toBe(401);
      const response = await post({
        authorization: `Basic ${Buffer.from('pdf:a-long-shared-secret').toString('base64')}`,
      });
      expect(response.status).toBe(200);
      expect(await pdfText(Buffer.from(await response.arrayBuffer()))).toContain('Behind a password');
    } finally {
      expect(await cli.stop('SIGTERM')).toBe(0);
    }
  });
});
