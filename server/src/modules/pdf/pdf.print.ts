import type { Config } from '../../config.ts';
import type { PaperOptions } from './pdf.client.ts';

/** Paper sizes in inches (ISO 216 A4 = 210 × 297 mm; US Letter = 8.5 × 11 in). */
const PAPER_INCHES = { A4: { width: 8.2677, height: 11.6929 }, Letter: { width: 8.5, height: 11 } } as const;

/** The paper of PDF attachments: PDF_PAPER_SIZE and PDF_MARGIN_MM (all four margins), in inches. */
export function paperOf(config: Pick<Config, 'PDF_PAPER_SIZE' | 'PDF_MARGIN_MM'>): PaperOptions {
  const size = PAPER_INCHES[config.PDF_PAPER_SIZE];
  return {
    widthIn: size.width,
    heightIn: size.height,
    marginIn: Math.round((config.PDF_MARGIN_MM / 25.4) * 1000) / 1000,
  };
}

/**
 * Print CSS for an email rendered as a document (issue #12): colours and backgrounds printed as
 * designed, images and tables kept within the page width, rows and images not split across pages.
 * Paper size and margins come with the render request (Gotenberg's form fields), not from here.
 */
const PRINT_CSS = `<style data-postwright-print>
@media print {
  html, body { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  img { max-width: 100% !important; height: auto; break-inside: avoid; }
  table { max-width: 100% !important; }
  tr, img, h1, h2, h3 { break-inside: avoid; }
  h1, h2, h3 { break-after: avoid; }
}
</style>`;

/** `html` (a rendered email) with the {@link PRINT_CSS} added to its head (or in front of it). */
export function printableHtml(html: string): string {
  const head = /<\/head\s*>/i.exec(html);
  if (head) return `${html.slice(0, head.index)}${PRINT_CSS}${html.slice(head.index)}`;
  return `${PRINT_CSS}${html}`;
}

/** Most characters of a PDF attachment's file name, `.pdf` included. */
const MAX_FILENAME_LENGTH = 200;

/**
 * A PDF attachment's file name made safe (issue #12 "filenames sanitised and given .pdf"): path
 * separators, control characters and the characters Windows refuses (`<>:"/\|?*`) become `_`,
 * leading dots and surrounding spaces are dropped, `.pdf` is added unless the name ends with it
 * (any case), at most 200 characters. An empty result becomes `document.pdf`.
 */
export function sanitisePdfFilename(name: string): string {
  let base = name
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
    .replace(/[\u0000-\u001f\u007f<>:"/\\|?*]/g, '_')
    .trim()
    .replace(/^\.+/, '')
    .trim();
  if (/\.pdf$/i.test(base)) base = base.slice(0, -4);
  base = base.slice(0, MAX_FILENAME_LENGTH - 4).trim();
  return `${base || 'document'}.pdf`;
}
