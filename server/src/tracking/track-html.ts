import { createRequire } from 'node:module';
import { escapeHtml } from '../html-escape.ts';
import { signTrackingToken, trackingKey } from './tokens.ts';

/**
 * Built-in open and click tracking of an outgoing email's HTML (issue #11), applied by the worker
 * at send to the rendered HTML (the stored template and the log's re-render stay untracked).
 *
 * - Opens: a 1×1 transparent GIF `<img src="BASE_URL/t/o/<token>">` is put before the last
 *   `</body>` (appended at the end when there is none).
 * - Clicks: the `href` of every `<a>` and `<area>` whose URL is absolute http(s) becomes
 *   `BASE_URL/t/c/<token>`, the token carrying the URL (normalised by WHATWG URL parsing). Left
 *   alone: mailto:, tel:, `#anchors`, relative and other schemes, URLs that do not parse, and any
 *   element carrying a `data-pw-notrack` attribute. Only the href attribute's own characters are
 *   replaced: the rest of the document is kept byte for byte.
 *
 * The HTML is parsed with htmlparser2 (the parser html-to-text uses), not with regular expressions,
 * so hrefs in comments, scripts, or attribute values that merely contain "href=" are not touched.
 * The text part is not changed.
 */

/** What decides whether an email is tracked: its template version, and the send's own override. */
export interface TrackingSettings {
  log: { id: string; teamId: string };
  version: { trackOpens: boolean; trackClicks: boolean };
  /** The send's `trackOpens`/`trackClicks` (issue #11): when set they win over the version's. */
  fields?: { trackOpens?: boolean | undefined; trackClicks?: boolean | undefined } | undefined;
}

/**
 * `html` with tracking added as the {@link TrackingSettings} ask (unchanged, not even parsed, when
 * both are off). `deps.config.BASE_URL` (no trailing slash) makes the absolute URLs;
 * `deps.encryptionKey` is the ENCRYPTION_KEY the token key is derived from (tokens.ts).
 */
export function trackEmailHtml(
  html: string,
  settings: TrackingSettings,
  deps: { encryptionKey: Buffer; config: { BASE_URL: string } },
): string {
  const opens = settings.fields?.trackOpens ?? settings.version.trackOpens;
  const clicks = settings.fields?.trackClicks ?? settings.version.trackClicks;
  if (!opens && !clicks) return html;
  const key = trackingKey(deps.encryptionKey);
  const base = deps.config.BASE_URL;
  const { id: emailId, teamId } = settings.log;
  return addTracking(html, {
    pixelUrl: opens ? `${base}/t/o/${signTrackingToken(key, { kind: 'open', emailId, teamId })}` : undefined,
    clickUrl: clicks
      ? (url) => `${base}/t/c/${signTrackingToken(key, { kind: 'click', emailId, teamId, url })}`
      : undefined,
  });
}

const require = createRequire(import.meta.url);
let parserClass: typeof import('htmlparser2').Parser | undefined;

/**
 * htmlparser2's Parser, loaded on the first tracked email (idle memory, issue #9: like html-to-text,
 * which loads the same CommonJS build, it stays out of a server that has not sent a tracked email).
 */
function Parser(): typeof import('htmlparser2').Parser {
  parserClass ??= (require('htmlparser2') as typeof import('htmlparser2')).Parser;
  return parserClass;
}

/**
 * Links tracked per email at most, in document order; later ones are left as written. Each costs a
 * signed token and grows the HTML (review finding, session 16: 52,000 links cost 1.4 s of the
 * worker's event loop per email and grew it to 8.5 MB); real emails hold dozens.
 */
export const MAX_TRACKED_LINKS = 1_000;

/** Elements whose `href` is a link a reader follows. */
const LINK_ELEMENTS = new Set(['a', 'area']);

/** The absolute http(s) URL `href` names, normalised; undefined for anything not tracked. */
export function trackableUrl(href: string): string | undefined {
  const value = href.trim();
  if (!/^https?:\/\//i.test(value)) return undefined;
  try {
    return new URL(value).href;
  } catch {
    return undefined;
  }
}

/**
 * `html` with the pixel `pixelUrl` (if given) inserted and each trackable link's href replaced by
 * `clickUrl(url)` (if given), the first {@link MAX_TRACKED_LINKS} of them. See the module comment
 * for the rules.
 */
export function addTracking(
  html: string,
  options: { pixelUrl?: string | undefined; clickUrl?: ((url: string) => string) | undefined },
): string {
  const edits: { start: number; end: number; text: string }[] = [];
  let href: { start: number; end: number; value: string } | undefined;
  let bodyEnd: number | undefined;
  let tracked = 0;
  const HtmlParser = Parser();
  const parser: InstanceType<typeof HtmlParser> = new HtmlParser({
    onopentagname() {
      href = undefined;
    },
    onattribute(name, value) {
      // The first of duplicate attributes is the one that counts (HTML "attribute duplicate" rule).
      if (name === 'href' && href === undefined) {
        href = { start: parser.startIndex, end: parser.endIndex, value };
      }
    },
    onopentag(name, attribs) {
      const link = href;
      href = undefined;
      if (!options.clickUrl || !link || !LINK_ELEMENTS.has(name) || 'data-pw-notrack' in attribs) return;
      if (tracked >= MAX_TRACKED_LINKS) return;
      const url = trackableUrl(link.value);
      if (!url) return;
      tracked += 1;
      edits.push({ start: link.start, end: link.end, text: `href="${escapeHtml(options.clickUrl(url))}"` });
    },
    onclosetag(name, isImplied) {
      if (name === 'body' && !isImplied) bodyEnd = parser.startIndex;
    },
  });
  parser.end(html);
  if (options.pixelUrl) {
    const pixel = `<img src="${escapeHtml(options.pixelUrl)}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0;margin:0;padding:0" />`;
    const at = bodyEnd ?? html.length;
    edits.push({ start: at, end: at, text: pixel });
  }
  edits.sort((a, b) => a.start - b.start);
  let out = '';
  let from = 0;
  for (const edit of edits) {
    out += html.slice(from, edit.start) + edit.text;
    from = edit.end;
  }
  return out + html.slice(from);
}
