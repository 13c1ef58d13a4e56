/**
 * The PDF module's public face (issue #12): the client of a Gotenberg-compatible renderer, the
 * process's renderer (configured URL or the bundled one, started lazily), print CSS and file names.
 * The bundled renderer's server (Fastify, puppeteer-core) loads only through {@link loadPdfRendererServer}.
 */
export { GotenbergClient, RenderFailedError, type RenderFailureCause } from './pdf.client.ts';
export { paperOf, printableHtml, sanitisePdfFilename } from './pdf.print.ts';
export {
  BROWSER_IDLE_CLOSE_MS,
  chromiumAvailable,
  createPdfRenderer,
  MAX_PDF_BYTES,
  type PdfRenderer,
} from './pdf.renderer.ts';

/** The bundled renderer's server module (`postwright pdf-renderer`), imported on demand. */
export const loadPdfRendererServer = () => import('./renderer/renderer.server.ts');
