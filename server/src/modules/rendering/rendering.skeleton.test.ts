import { describe, expect, it } from 'vitest';
import { compileTemplate, parseDesign } from './index.ts';
import {
  buildDesign,
  buttonBlock,
  headingBlock,
  htmlBlock,
  imageBlock,
  loadFixtures,
  type RawBlock,
  textBlock,
} from './rendering.factories.ts';
import { designStringsOf, renderDesignHtml, withStrings } from './rendering.html.ts';
import { parseLiquid, renderLiquid } from './rendering.liquid.ts';
import { buildSkeleton, escapeLikeReact } from './rendering.skeleton.ts';

/** The HTML as rendered before skeletons: Liquid on each string, then React on the whole document. */
function reactRender(designJson: unknown, variables: Record<string, unknown>): string {
  const design = parseDesign(designJson);
  const strings = designStringsOf(design);
  const values = renderLiquid(
    strings.map((string) => parseLiquid(string.path, string.source, string.mode)),
    variables,
  );
  return renderDesignHtml(withStrings(design, strings, values));
}

const VALUES = [
  'Ada',
  '',
  ' ',
  `a&b <c> "d" 'e' &amp; &#x27;`,
  '<script>alert(1)</script>',
  'javascript:alert(1)',
  ' JaVa\tScript:alert(1)',
  'data:text/html,x',
  'https://example.test/?a=1&b=<2>',
  'line one\nline two\r\n  three  ',
  '{{ not liquid }} {% raw %}',
  'pwslot0n0e',
  'Zoë 🚀 \u0000\u007f',
];

/** Every string prop of a block with `{{ v }}` added (URL props: the value alone). */
function withLiquidEverywhere(design: Record<string, RawBlock>): Record<string, RawBlock> {
  const copy: Record<string, RawBlock> = {};
  for (const [id, block] of Object.entries(design)) {
    const props = { ...(block.data.props ?? {}) };
    for (const prop of ['text', 'alt', 'contents']) {
      if (typeof props[prop] === 'string') props[prop] = `${props[prop]} {{ v }}`;
    }
    for (const prop of ['url', 'linkHref', 'imageUrl']) {
      if (typeof props[prop] === 'string') props[prop] = '{{ v }}';
    }
    copy[id] = { ...block, data: { ...block.data, ...(block.data.props ? { props } : {}) } };
  }
  return copy;
}

const EVERY_BLOCK = buildDesign([
  textBlock('Hello {{ v }}!'),
  headingBlock('{{ v }}'),
  htmlBlock('<p class="x">{{ v }}</p>'),
  buttonBlock('Go {{ v }}', '{{ v }}'),
  imageBlock('{{ v }}', '{{ v }}', '{{ v }} alt'),
  imageBlock('https://example.test/a.png?{{ v }}', undefined, 'static'),
  { type: 'Avatar', data: { props: { imageUrl: '{{ v }}', alt: '{{ v }}' } } },
]);

describe('rendering: React rendered once per template (skeleton)', () => {
  const designs = [
    { name: 'every block type', designJson: EVERY_BLOCK },
    ...loadFixtures().map(({ name, design }) => ({ name, designJson: withLiquidEverywhere(design) })),
  ];

  it.each(designs)(
    '$name: renders the same HTML as React on every string, for hostile values',
    async ({ designJson }) => {
      const template = compileTemplate({ subject: 'Hi {{ v }}', designJson });
      for (const v of VALUES) {
        const email = await template.renderHtml({ v });
        expect(email.html, JSON.stringify(v)).toBe(reactRender(designJson, { v }));
      }
    },
  );

  it('slots every Liquid string of a design without markdown', () => {
    const design = parseDesign(EVERY_BLOCK);
    const strings = designStringsOf(design);
    const dynamic = strings.flatMap((string, index) => (string.source.includes('{{') ? [index] : []));
    const skeleton = buildSkeleton(design, strings, dynamic);
    expect(skeleton?.slots.toSorted((a, b) => a - b)).toEqual(dynamic);
    expect(skeleton?.pieces).toHaveLength(dynamic.length + 1);
  });

  it('has no skeleton for a design with a markdown string that carries Liquid (marked renders it)', () => {
    const design = parseDesign(
      buildDesign([textBlock('**{{ v }}**', { markdown: true }), textBlock('{{ v }}')]),
    );
    const strings = designStringsOf(design);
    expect(buildSkeleton(design, strings, [0, 1])).toBeNull();
    expect(buildSkeleton(design, strings, [1])).not.toBeNull();
  });

  it('escapes what React escapes', () => {
    expect(escapeLikeReact(`<a href="x">'&'</a>`)).toBe(
      '&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;/a&gt;',
    );
    expect(escapeLikeReact('plain')).toBe('plain');
  });
});
