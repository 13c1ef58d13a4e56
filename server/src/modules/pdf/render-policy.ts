import { RenderFailedError } from './pdf.client.ts';

/**
 * The Content-Security-Policy every page Postwright has a browser render carries (template PDFs
 * and thumbnails, bundled renderer or a Gotenberg at PDF_RENDERER_URL): nothing may be fetched
 * but inline styles, `data:` fonts and images, and images from `allowedImageHosts`
 * (PDF_ALLOWED_IMAGE_HOSTS, any port, http or https). A template's HTML is its author's, so
 * without it a template could make the renderer fetch internal addresses and show the answer in
 * the thumbnail (an `<iframe>` to a cloud metadata URL on a Gotenberg that allows all URLs), or
 * send requests the bundled renderer's per-page interception never sees: Chromium issues
 * `<link rel="prefetch">` from the browser process (measured: the prefetch reached a local
 * server without the policy, not with it). CSP Level 3: `default-src` covers frames, objects,
 * scripts, fetches and prefetches.
 */
export function renderContentSecurityPolicy(allowedImageHosts: readonly string[]): string {
  const imageHosts = allowedImageHosts.flatMap((host) => [`http://${host}:*`, `https://${host}:*`]);
  return [
    "default-src 'none'",
    `img-src data: ${imageHosts.join(' ')}`.trim(),
    "style-src 'unsafe-inline' data:",
    'font-src data:',
  ].join('; ');
}

/** The parse5 module, imported on the first render only (idle memory, issue #9). */
type Parse5 = typeof import('parse5');
type Parse5Node = import('parse5').DefaultTreeAdapterTypes.Node;
type Parse5Document = import('parse5').DefaultTreeAdapterTypes.Document;
type Parse5Element = import('parse5').DefaultTreeAdapterTypes.Element;
let parse5: Promise<Parse5> | undefined;
function loadParse5(): Promise<Parse5> {
  parse5 ??= import('parse5');
  return parse5;
}

/**
 * Elements a page may not carry into a browser: no policy governs what they make the browser do.
 * `<meta http-equiv>`: `refresh` navigates the page to any URL (a Content-Security-Policy does not
 * cover navigation: a Gotenberg at PDF_RENDERER_URL loaded a cloud metadata URL and printed it,
 * review finding, session 13), `set-cookie`, or a policy of the template's own. `<link>`:
 * `preconnect` and `dns-prefetch` are opened by Chromium's network service, outside the page's
 * request interception and its policy (measured: three TCP connections to a local port from the
 * bundled renderer). `<base>`: rebases every relative URL of the page. The others load or run
 * something (the policy refuses them already) or are parsed differently with scripting on and off
 * (`noscript`) or as raw text, where a browser and the cleaning could disagree; an email needs none.
 */
const STRIPPED = new Set([
  'base',
  'link',
  'noscript',
  'script',
  'iframe',
  'frame',
  'frameset',
  'object',
  'embed',
  'noembed',
  'noframes',
  'xmp',
  'plaintext',
  'portal',
]);

function isStripped(node: Parse5Node): node is Parse5Element {
  if (!('tagName' in node)) return false;
  if (STRIPPED.has(node.tagName)) return true;
  return node.tagName === 'meta' && node.attrs.some((attribute) => attribute.name === 'http-equiv');
}

/** Removes {@link isStripped} elements anywhere under `parent` (template contents too). @returns how many. */
function strip(parent: Parse5Node): number {
  let removed = 0;
  const stack: Parse5Node[] = [parent];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if ('content' in node && node.content) stack.push(node.content);
    if (!('childNodes' in node)) continue;
    const kept = node.childNodes.filter((child) => !isStripped(child));
    removed += node.childNodes.length - kept.length;
    node.childNodes = kept;
    stack.push(...kept);
  }
  return removed;
}

/** The `<head>` of a parsed document (parse5 always makes one). */
function headOf(document: Parse5Document): Parse5Element | undefined {
  const root = document.childNodes.find((node) => 'tagName' in node && node.tagName === 'html');
  if (!root || !('childNodes' in root)) return undefined;
  return root.childNodes.find((node): node is Parse5Element => 'tagName' in node && node.tagName === 'head');
}

/** Rounds of cleaning a page's own serialization before it is given up as unstable. */
const CLEANING_ROUNDS = 3;

/**
 * `html` made safe for a browser to render, with the render policy
 * ({@link renderContentSecurityPolicy}) as its head's first element: for a renderer that loads
 * each page as a document of its own (a Gotenberg at PDF_RENDERER_URL). The page is cleaned as
 * {@link cleanedForRender} describes, and the policy checked to be first in its head after every
 * re-parse. A policy the template carries itself is dropped; ours applies to the whole page.
 * @returns the page to render (a whole document: `<html><head>…`).
 * @throws RenderFailedError RENDERER_ERROR when the page still fails the check after
 *   {@link CLEANING_ROUNDS} rounds.
 */
export function withRenderPolicy(html: string, allowedImageHosts: readonly string[]): Promise<string> {
  return cleaned(html, renderContentSecurityPolicy(allowedImageHosts));
}

/**
 * `html` made safe for a browser to render, without a policy of its own: for a document that
 * carries the render policy already (the bundled renderer's pages get it as a `<meta>` in their
 * document once, when the page opens: policyDocument in chromium-pool.ts; a `<meta>` per render
 * would pile up in their reused document). The
 * page is parsed as a browser parses it (parse5, the WHATWG algorithm), the {@link isStripped}
 * elements are removed and the page serialized; then the result is checked the way it will be
 * used: parsed again with scripting off (the bundled renderer) and on (Gotenberg), it must hold no
 * stripped element. Markup can re-parse into another tree than the one it was serialized from
 * (nested forms and foreign content: a `<meta>` inside a `<style>` text comes back as an element),
 * so a page that fails the check is cleaned again from its serialization.
 * @returns the page to render (a whole document: `<html><head>…`).
 * @throws RenderFailedError RENDERER_ERROR when the page still fails the check after
 *   {@link CLEANING_ROUNDS} rounds.
 */
export function cleanedForRender(html: string): Promise<string> {
  return cleaned(html, undefined);
}

/** {@link cleanedForRender}, with `policy` (when given) as a `<meta>` first in the head. */
async function cleaned(html: string, policy: string | undefined): Promise<string> {
  const { parse, serialize, defaultTreeAdapter, html: spec } = await loadParse5();
  const isPolicy = (node: Parse5Node | undefined) =>
    node !== undefined &&
    'tagName' in node &&
    node.tagName === 'meta' &&
    node.attrs.length === 2 &&
    node.attrs.some(
      (attribute) => attribute.name === 'http-equiv' && attribute.value === 'Content-Security-Policy',
    ) &&
    node.attrs.some((attribute) => attribute.name === 'content' && attribute.value === policy);
  const safe = (page: string) =>
    [false, true].every((scriptingEnabled) => {
      const document = parse(page, { scriptingEnabled });
      if (policy !== undefined) {
        const head = headOf(document);
        if (!isPolicy(head?.childNodes[0])) return false;
        head!.childNodes.shift();
      }
      return strip(document) === 0;
    });
  let page = html;
  for (let round = 0; round < CLEANING_ROUNDS; round++) {
    const document = parse(page, { scriptingEnabled: false });
    strip(document);
    if (policy !== undefined) {
      const head = headOf(document);
      if (!head) break;
      const meta = defaultTreeAdapter.createElement('meta', spec.NS.HTML, [
        { name: 'http-equiv', value: 'Content-Security-Policy' },
        { name: 'content', value: policy },
      ]);
      const first = head.childNodes[0];
      if (first) defaultTreeAdapter.insertBefore(head, meta, first);
      else defaultTreeAdapter.appendChild(head, meta);
    }
    page = serialize(document, { scriptingEnabled: false });
    if (safe(page)) return page;
  }
  throw new RenderFailedError('RENDERER_ERROR', 'the page could not be cleaned of navigating elements');
}
