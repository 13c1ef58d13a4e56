import { describe, expect, it } from 'vitest';
import { paperOf, printableHtml, sanitisePdfFilename } from './pdf.print.ts';

describe('sanitisePdfFilename (issue #12: file names sanitised and given .pdf)', () => {
  it.each([
    ['invoice', 'invoice.pdf'],
    ['invoice.pdf', 'invoice.pdf'],
    ['Report.PDF', 'Report.pdf'],
    ['../../etc/passwd', '_.._etc_passwd.pdf'],
    ['a\\b/c', 'a_b_c.pdf'],
    ['line\r\nbreak', 'line__break.pdf'],
    ['what?*<>|"', 'what______.pdf'],
    ['   ', 'document.pdf'],
    ['...', 'document.pdf'],
    ['.hidden', 'hidden.pdf'],
  ])('%j → %j', (input, expected) => {
    expect(sanitisePdfFilename(input)).toBe(expected);
  });

  it('keeps names to 200 characters, .pdf included', () => {
    const name = sanitisePdfFilename('x'.repeat(500));
    expect(name).toHaveLength(200);
    expect(name.endsWith('.pdf')).toBe(true);
  });
});

describe('paperOf', () => {
  it('gives A4 or Letter in inches and the margin in inches', () => {
    expect(paperOf({ PDF_PAPER_SIZE: 'A4', PDF_MARGIN_MM: 25.4 })).toEqual({
      widthIn: 8.2677,
      heightIn: 11.6929,
      marginIn: 1,
    });
    expect(paperOf({ PDF_PAPER_SIZE: 'Letter', PDF_MARGIN_MM: 0 })).toEqual({
      widthIn: 8.5,
      heightIn: 11,
      marginIn: 0,
    });
  });
});

describe('printableHtml', () => {
  it('adds the print style sheet inside the head, or in front without one', () => {
    const withHead = printableHtml('<html><head><title>t</title></head><body>x</body></html>');
    expect(withHead).toMatch(/<title>t<\/title><style data-postwright-print>[\s\S]*<\/style><\/head>/);
    expect(printableHtml('<p>x</p>')).toMatch(/^<style data-postwright-print>[\s\S]*<\/style><p>x<\/p>$/);
  });
});
