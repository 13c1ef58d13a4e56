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

/**
 * `html` with the render policy ({@link renderContentSecurityPolicy}) as its very first element: a
 * `<meta http-equiv>` before anything else lands in the document's head, and applies to every
 * element after it. A policy the template carries itself can only narrow it (policies combine).
 */
export function withRenderPolicy(html: string, allowedImageHosts: readonly string[]): string {
  const policy = renderContentSecurityPolicy(allowedImageHosts).replaceAll('"', '&quot;');
  return `<meta http-equiv="Content-Security-Policy" content="${policy}">${html}`;
}
