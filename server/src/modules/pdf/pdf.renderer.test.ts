import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { pdfText } from '../../../test/helpers/pdf.ts';
import { loadConfig } from '../../config.ts';
import { createPdfRenderer } from './pdf.renderer.ts';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

function config(env: Record<string, string> = {}) {
  return loadConfig({ CHROMIUM_PATH: CHROMIUM, ...env });
}

describe('createPdfRenderer (issue #12)', () => {
  it('is absent without PDF_RENDERER_URL unless the process may run the bundled renderer', () => {
    expect(createPdfRenderer(config(), { bundled: false })).toBeUndefined();
  });

  it('is absent when Chromium is not at CHROMIUM_PATH', () => {
    expect(
      createPdfRenderer(config({ CHROMIUM_PATH: '/nonexistent/chromium' }), { bundled: true }),
    ).toBeUndefined();
  });

  it('uses PDF_RENDERER_URL when set, even where the bundled one could run', () => {
    const renderer = createPdfRenderer(config({ PDF_RENDERER_URL: 'http://127.0.0.1:9' }), { bundled: true });
    expect(renderer?.source).toBe('url');
  });

  it('sends a PDF_RENDERER_URL renderer every page with the render policy first', async () => {
    const received: string[] = [];
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push(Buffer.concat(chunks).toString('utf8'));
        response.writeHead(200, { 'content-type': 'application/pdf' }).end('%PDF-1.4 fake');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const renderer = createPdfRenderer(
      config({
        PDF_RENDERER_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        PDF_ALLOWED_IMAGE_HOSTS: 'cdn.example.com',
      }),
      { bundled: false },
    );
    try {
      await renderer!.renderPdf('<iframe src="http://169.254.169.254/latest/meta-data/"></iframe>', 'team_a');
      await renderer!.screenshot('<p>thumb</p>', { width: 10, height: 10 }, 'team_a');
    } finally {
      await renderer!.close();
      server.close();
    }
    expect(received).toHaveLength(2);
    for (const body of received) {
      expect(body).toContain(
        `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data: http://cdn.example.com:* https://cdn.example.com:*; style-src 'unsafe-inline' data:; font-src data:">`,
      );
    }
    // The frame is gone too (review finding, session 13: elements no policy governs are stripped).
    expect(received[0]).not.toContain('169.254.169.254');
  });

  it('starts the bundled renderer at the first render only, and stops it on close', async () => {
    const renderer = createPdfRenderer(config(), { bundled: true });
    expect(renderer?.source).toBe('bundled');
    try {
      const pdf = await renderer!.renderPdf('<h1>Rendered in process</h1>', 'team_a');
      expect(await pdfText(pdf)).toContain('Rendered in process');
      const png = await renderer!.screenshot('<h1>thumb</h1>', { width: 120, height: 90 }, 'team_a');
      expect(png.readUInt32BE(16)).toBe(120);
    } finally {
      await renderer!.close();
    }
    await expect(renderer!.renderPdf('<p>after close</p>', 'team_a')).rejects.toMatchObject({
      failure: 'RENDERER_UNREACHABLE',
    });
  });

  it("gives another team's render the next free page, not a place behind a team's backlog", async () => {
    const renderer = createPdfRenderer(config({ PDF_RENDERER_PAGES: '2' }), { bundled: true });
    const finished: string[] = [];
    const render = (teamId: string, label: string) =>
      renderer!.renderPdf(`<h1>${label}</h1>`, teamId).then((pdf) => {
        finished.push(label);
        return pdf;
      });
    try {
      // Both pages opened before the measured renders (a page's first render also opens it, so
      // one slow opening could reorder the finishes, not the turns).
      await Promise.all([render('team_flood', 'warm-up 1'), render('team_flood', 'warm-up 2')]);
      finished.length = 0;
      const flood = Array.from({ length: 12 }, (_, index) => render('team_flood', `flood ${index}`));
      // Team B asks once the flooding team's twelve are all in: first come, it would finish last.
      const other = render('team_other', 'other');
      await Promise.all([...flood, other]);
      expect(await pdfText(await other)).toContain('other');
    } finally {
      await renderer!.close();
    }
    // Its turn comes third (after the two flood renders holding the pages; first come it would be
    // 13th). Renders on two pages finish in any order of their durations, so its finish may come a
    // render or two later than its turn: a full run saw it 5th (index 4).
    expect(finished.indexOf('other')).toBeLessThanOrEqual(5);
    expect(finished).toHaveLength(13);
  });

  it('makes the bundled renderer require credentials that only this process knows', async () => {
    const renderer = createPdfRenderer(config(), { bundled: true });
    try {
      expect(await pdfText(await renderer!.renderPdf('<p>with its credentials</p>', 'team_a'))).toContain(
        'with its credentials',
      );
      const url = renderer!.bundledUrl;
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const body = new FormData();
      body.append('files', new Blob(['<p>from another process</p>'], { type: 'text/html' }), 'index.html');
      const response = await fetch(`${url}/forms/chromium/convert/html`, { method: 'POST', body });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Basic /);
    } finally {
      await renderer!.close();
    }
    expect(renderer!.bundledUrl).toBeUndefined();
  });
});
