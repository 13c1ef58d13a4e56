import { type DefaultTreeAdapterTypes, parse } from 'parse5';
import { describe, expect, it } from 'vitest';
import { cleanedForRender, withRenderPolicy } from './render-policy.ts';

const POLICY = `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline' data:; font-src data:">`;

/** The elements of `html` as a browser parses it (scripting off and on), as `tag[http-equiv]` names. */
function elementsOf(html: string): string[] {
  const names: string[] = [];
  for (const scriptingEnabled of [false, true]) {
    const stack: DefaultTreeAdapterTypes.Node[] = [parse(html, { scriptingEnabled })];
    while (stack.length > 0) {
      const node = stack.pop()!;
      if ('tagName' in node) {
        const equiv = node.attrs.find((attribute) => attribute.name === 'http-equiv');
        names.push(equiv ? `${node.tagName}[${equiv.value.toLowerCase()}]` : node.tagName);
      }
      if ('content' in node && node.content) stack.push(node.content);
      if ('childNodes' in node) stack.push(...node.childNodes);
    }
  }
  return names;
}

describe('withRenderPolicy (review finding, session 13)', () => {
  it('puts the policy first in the head and keeps the page', async () => {
    const page = await withRenderPolicy(
      '<!DOCTYPE html><title>T</title><p style="color:red">Invoice &amp; co</p>',
      [],
    );
    expect(page).toBe(
      `<!DOCTYPE html><html><head>${POLICY}<title>T</title></head><body><p style="color:red">Invoice &amp; co</p></body></html>`,
    );
  });

  it('strips meta http-equiv (refresh, a policy of its own), link and base wherever they are', async () => {
    const page = await withRenderPolicy(
      [
        '<meta charset="utf-8"><meta http-equiv="refresh" content="0;url=http://169.254.169.254/">',
        '<base href="http://10.0.0.1/"><link rel="preconnect" href="http://127.0.0.1:9">',
        '<p>body</p><META HTTP-EQUIV=Refresh CONTENT="0;url=http://10.0.0.2/">',
        '<noscript><meta http-equiv="refresh" content="0;url=http://10.0.0.3/"></noscript>',
        '<template><link rel="prefetch" href="http://10.0.0.4/"></template>',
        '<svg><link href="http://10.0.0.5/"/></svg>',
        `<meta http-equiv="Content-Security-Policy" content="default-src *">`,
      ].join(''),
      ['cdn.example.com'],
    );
    expect(page).not.toMatch(/10\.0\.0|169\.254|127\.0\.0\.1|refresh|<link|<base|default-src \*/i);
    expect(page).toContain('<meta charset="utf-8">');
    expect(page).toContain('<p>body</p>');
    expect(page.match(/http-equiv/g)).toHaveLength(1);
    expect(page.indexOf('Content-Security-Policy')).toBeLessThan(page.indexOf('charset'));
  });

  it('cleans what a comment or foreign content would bring back when parsed again', async () => {
    for (const html of [
      '<!--><meta http-equiv="refresh" content="0;url=http://10.0.0.1/">-->',
      '<svg></p><style><a id="</style><meta http-equiv=refresh content=0;url=http://10.0.0.1/>">',
      '<math><mtext><table><mglyph><style><!--</style><link rel=preconnect href=http://10.0.0.1/>',
      // Cleaned once and serialized, this re-parses with the meta as an element (nested forms).
      '<form><math><mtext></form><form><mglyph><style></math><meta http-equiv=refresh content=0;url=http://10.0.0.1/>',
      // Scripting on (Gotenberg), noscript is raw text up to </noscript>; off, the title is an attribute.
      '<noscript><p title="</noscript><meta http-equiv=refresh content=0;url=http://10.0.0.1/>"></noscript>',
      '<style><noscript><p title="</style><meta http-equiv=refresh content=0;url=http://10.0.0.1/>">',
    ]) {
      const page = await withRenderPolicy(html, []);
      // Whatever survives is text or an attribute value, never an element a browser acts on.
      const elements = elementsOf(page);
      expect(elements.filter((name) => name.startsWith('meta['))).toEqual([
        'meta[content-security-policy]',
        'meta[content-security-policy]',
      ]);
      expect(elements).not.toContain('link');
      expect(elements).not.toContain('base');
    }
  });

  it('cleans without a policy of its own for a document that holds it already (the bundled pages)', async () => {
    const page = await cleanedForRender(
      '<meta http-equiv="refresh" content="0;url=http://10.0.0.1/"><link rel="preconnect" href="http://10.0.0.2/"><p>Invoice</p>',
    );
    expect(page).toBe('<html><head></head><body><p>Invoice</p></body></html>');
    const nested = await cleanedForRender(
      '<form><math><mtext></form><form><mglyph><style></math><meta http-equiv=refresh content=0;url=http://10.0.0.1/>',
    );
    expect(elementsOf(nested).filter((name) => name.startsWith('meta') || name === 'link')).toEqual([]);
  });
});
