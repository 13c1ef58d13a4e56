/**
 * Which tracking hits count (issue #11: "Machine pre-fetchers are not counted twice"). A hit is
 * NOT counted — the pixel or redirect is still served — when:
 * - it is a HEAD request (link checkers and scanners probe with HEAD; a person's client GETs);
 * - it says it is a prefetch or preview: a `Purpose`, `Sec-Purpose` or `X-Purpose` header holding
 *   "prefetch" or "preview", or `X-Moz: prefetch` (browsers' and proxies' prefetch hints);
 * - its User-Agent is one of the known link scanners, unfurlers and HTTP libraries in
 *   {@link MACHINE_USER_AGENT} (security gateways that follow every link of an incoming mail:
 *   Microsoft Safe Links, Proofpoint, Mimecast, Barracuda, …; chat link previews; curl, wget, …).
 * Image proxies that fetch when a person opens the mail (GoogleImageProxy, YahooMailProxy, Outlook)
 * do count. Apple Mail Privacy Protection fetches with an ordinary browser User-Agent and cannot be
 * told apart; such opens count. Counted hits of the same token are recorded once (tracking.service).
 */
const MACHINE_USER_AGENT =
  /bot\b|crawler|spider|slurp|facebookexternalhit|slackbot|twitterbot|linkedinbot|discordbot|telegrambot|whatsapp|skypeuripreview|safelinks|barracuda|proofpoint|mimecast|messagelabs|trendmicro|forcepoint|fireeye|ironport|sophos|symantec|zscaler|headlesschrome|phantomjs|python-requests|python-urllib|go-http-client|okhttp|java\/|curl\/|wget\//i;

const PURPOSE_HEADERS = ['purpose', 'sec-purpose', 'x-purpose', 'x-moz'] as const;

/**
 * True when a hit with this `method` and these request `headers` is a machine's (see the module
 * comment for the rule) and must not move the email's status.
 */
export function isMachineHit(
  method: string,
  headers: Record<string, string | string[] | undefined>,
): boolean {
  if (method === 'HEAD') return true;
  for (const name of PURPOSE_HEADERS) {
    const value = String(headers[name] ?? '').toLowerCase();
    if (value.includes('prefetch') || value.includes('preview')) return true;
  }
  return MACHINE_USER_AGENT.test(String(headers['user-agent'] ?? ''));
}
