import { describe, expect, it } from 'vitest';
import { AppError } from '../../http/errors.ts';
import {
  compileTemplate,
  MARKDOWN_MAX_CHARS,
  MARKDOWN_MAX_DELIMITERS,
  MARKDOWN_SPACE_RUN,
} from './rendering.compile.ts';
import {
  htmlNestingDepth,
  htmlToText,
  longWordWork,
  MAX_HTML_NESTING,
  TEXT_PART_MAX_CHARS,
} from './rendering.html.ts';

/*
 * Review findings, session 12: marked (Markdown Text blocks) takes time growing with the square
 * of a run of spaces (100,000 of them stalled the process ≈ 15 s at save, preview and send), and
 * html-to-text overflowed the stack on deeply nested HTML (a 500). Both are now bounded.
 */
function design(text: string, markdown: boolean) {
  return {
    root: { type: 'EmailLayout', data: { childrenIds: ['b1'] } },
    b1: { type: 'Text', data: { style: {}, props: { text, markdown } } },
  };
}

function htmlBlock(contents: string) {
  return {
    root: { type: 'EmailLayout', data: { childrenIds: ['b1'] } },
    b1: { type: 'Html', data: { style: {}, props: { contents } } },
  };
}

function limitExceeded(run: () => unknown): void {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).details.reason).toBe('LIMIT_EXCEEDED');
    return;
  }
  throw new Error('expected LIMIT_EXCEEDED');
}

describe('Markdown handed to marked is bounded', () => {
  it('refuses a saved Markdown text with a run of more than 64 spaces (the quadratic case)', () => {
    limitExceeded(() =>
      compileTemplate({ subject: 's', designJson: design(`<a${' '.repeat(100_000)}`, true) }),
    );
    limitExceeded(() =>
      compileTemplate({ subject: 's', designJson: design(`a${' '.repeat(MARKDOWN_SPACE_RUN + 1)}b`, true) }),
    );
    // Plain (not Markdown) text is not marked's: any run of spaces is fine there.
    expect(() =>
      compileTemplate({ subject: 's', designJson: design(`a${' '.repeat(100_000)}b`, false) }),
    ).not.toThrow();
    expect(() =>
      compileTemplate({
        subject: 's',
        designJson: design(`a${' '.repeat(MARKDOWN_SPACE_RUN)}b **c**`, true),
      }),
    ).not.toThrow();
  });

  it('cuts long runs of spaces that variables bring, and refuses Markdown past the limit', async () => {
    const template = compileTemplate({ subject: 's', designJson: design('Hi {{ name }} **there**', true) });
    const spaced = await template.render({ name: `a${' '.repeat(100_000)}b` });
    expect(spaced.html).toContain('<strong>there</strong>');
    expect(spaced.html).not.toContain(' '.repeat(MARKDOWN_SPACE_RUN + 1));
    expect(spaced.html).toContain(`a${' '.repeat(MARKDOWN_SPACE_RUN)}b`);

    const fits = await template.render({ name: 'x'.repeat(MARKDOWN_MAX_CHARS - 100) });
    expect(fits.html).toContain('<strong>there</strong>');
    await expect(template.render({ name: 'x'.repeat(MARKDOWN_MAX_CHARS) })).rejects.toMatchObject({
      details: { reason: 'LIMIT_EXCEEDED' },
    });
  });

  it('refuses more emphasis marks than the limit (marked took 2.7 s on *a repeated to 20,000 characters)', async () => {
    const template = compileTemplate({ subject: 's', designJson: design('{{ body }} **bold**', true) });
    // The template's own two pairs count too. (Liquid writes a variable's `*` as `\*`, which
    // counts all the same; its `_` and `~` stay marks.)
    const fits = await template.render({ body: '_a_ '.repeat((MARKDOWN_MAX_DELIMITERS - 4) / 2) });
    expect(fits.html).toContain('<em>a</em>');
    for (const mark of ['*', '_', '~']) {
      await expect(
        template.render({ body: `${mark}a `.repeat(MARKDOWN_MAX_DELIMITERS) }),
      ).rejects.toMatchObject({ details: { reason: 'LIMIT_EXCEEDED' } });
    }
    limitExceeded(() =>
      compileTemplate({ subject: 's', designJson: design('*a '.repeat(MARKDOWN_MAX_DELIMITERS + 1), true) }),
    );
  });

  it('refuses a saved Markdown text longer than the limit', () => {
    limitExceeded(() =>
      compileTemplate({ subject: 's', designJson: design('x'.repeat(MARKDOWN_MAX_CHARS + 1), true) }),
    );
  });
});

describe('html-to-text on deeply nested HTML', () => {
  it('is LIMIT_EXCEEDED (not a stack overflow) for the text part', () => {
    limitExceeded(() => htmlToText(`<p>${'<b>'.repeat(20_000)}deep`));
    expect(htmlToText('<p>Hello <b>there</b></p>')).toBe('Hello there');
  });

  it('refuses an Html block nested deeper than the bound, also when a Liquid loop builds it', async () => {
    const deep = compileTemplate({ subject: 's', designJson: htmlBlock('<table>'.repeat(2_000)) });
    await expect(deep.render({})).rejects.toMatchObject({ details: { reason: 'LIMIT_EXCEEDED' } });
    const looped = compileTemplate({
      subject: 's',
      designJson: htmlBlock('{% for i in (1..n) %}<div>{% endfor %}x'),
    });
    const fits = await looped.render({ n: MAX_HTML_NESTING - 10 });
    expect(fits.text).toContain('x');
    await expect(looped.render({ n: MAX_HTML_NESTING + 1 })).rejects.toMatchObject({
      details: { reason: 'LIMIT_EXCEEDED', issues: [{ path: 'b1.data.props.contents' }] },
    });
    // Siblings are not depth: 5,000 closed paragraphs, or list items whose ends are implied.
    const wide = compileTemplate({
      subject: 's',
      designJson: htmlBlock(`${'<p>p</p>'.repeat(5_000)}<ul>${'<li>item'.repeat(5_000)}</ul>`),
    });
    expect((await wide.render({})).text).toContain('item');
    expect(htmlNestingDepth('<table><tr><td><br><img src=x><b>a</b></td></tr></table>', 100)).toBe(4);
  });
});

describe('html-to-text stays linear (review findings, session 16)', () => {
  it('does not prefix each quote level again: 250 nested blockquotes make a text part of their size', () => {
    // Before: 100 MB of text in 25 s for `{n: 197}` of such a loop.
    const html = `${'<blockquote>'.repeat(250)}${'a<br>'.repeat(10_000)}${'</blockquote>'.repeat(250)}`;
    const text = htmlToText(html);
    expect(text.split('\n').filter((line) => line === 'a')).toHaveLength(10_000);
    expect(text.length).toBeLessThan(html.length);
  });

  it('refuses HTML whose joined text would make line wrapping quadratic, at once; wraps ordinary text as before', () => {
    // Before: html-to-text re-split the whole word at each of 198,000 text nodes (11.7 s), or at
    // each of 43,000 empty links' [url]s (6.3 s).
    const started = performance.now();
    limitExceeded(() => htmlToText(`<table><tr>${'<td>a'.repeat(198_000)}</table>`));
    limitExceeded(() => htmlToText('<a href="http://a.b"></a>'.repeat(43_000)));
    limitExceeded(() => htmlToText(`<p>${'<b>a</b>'.repeat(100_000)}</p>`));
    expect(performance.now() - started).toBeLessThan(3_000);
    limitExceeded(() => htmlToText(`<p>${'x '.repeat(TEXT_PART_MAX_CHARS / 2 + 10)}</p>`));
    // Ordinary text: wrapped at 78, a pre line kept whole, a list item's continuation indented.
    const row =
      'col1      col2      col3      col4      col5      col6      col7      col8      col9      col10';
    expect(htmlToText(`<pre>${row}</pre>`)).toBe(row);
    const item = htmlToText(`<ul><li>${'word '.repeat(30)}</li></ul>`).split('\n');
    expect(item[0]!.startsWith('* word')).toBe(true);
    expect(item[1]!.startsWith('   word')).toBe(true);
    expect(Math.max(...item.map((line) => line.length))).toBeLessThanOrEqual(78);
    expect(
      longWordWork(
        '<p>plain words, a https://example.test/a-long-link-of-some-length/that-is-longer-than-a-line/x link</p>',
        1e9,
      ),
    ).toBeLessThan(200);
  });
});
