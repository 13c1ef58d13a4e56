import { describe, expect, it } from 'vitest';
import { AppError } from '../../http/errors.ts';
import { compileTemplate, MARKDOWN_MAX_CHARS, MARKDOWN_SPACE_RUN } from './rendering.compile.ts';
import { htmlToText } from './rendering.html.ts';

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
    await expect(template.render({ name: '*a'.repeat(MARKDOWN_MAX_CHARS / 2) })).rejects.toMatchObject({
      details: { reason: 'LIMIT_EXCEEDED' },
    });
  });

  it('refuses a saved Markdown text longer than the limit', () => {
    limitExceeded(() =>
      compileTemplate({ subject: 's', designJson: design('x'.repeat(MARKDOWN_MAX_CHARS + 1), true) }),
    );
  });
});

describe('html-to-text on deeply nested HTML', () => {
  it('is LIMIT_EXCEEDED (not a stack overflow) for the text part, and a template carrying it renders no 500', async () => {
    limitExceeded(() => htmlToText(`<p>${'<b>'.repeat(20_000)}deep`));
    const template = compileTemplate({ subject: 's', designJson: htmlBlock('<table>'.repeat(2_000)) });
    await expect(template.render({})).rejects.toMatchObject({ details: { reason: 'LIMIT_EXCEEDED' } });
    expect(htmlToText('<p>Hello <b>there</b></p>')).toBe('Hello there');
  });
});
