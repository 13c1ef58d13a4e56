import { describe, expect, it } from 'vitest';
import { firstFreeSlug, SLUG_PATTERN, slugify } from './slug.ts';

describe('slugify', () => {
  it.each([
    ['Acme Mail Ops', 'acme-mail-ops'],
    ['  Équipe  Nord!! ', 'equipe-nord'],
    ['Welcome Email!', 'welcome-email'],
    ['***', 'team'],
  ])('%s → %s', (name, slug) => {
    expect(slugify(name, 'team')).toBe(slug);
    expect(slug).toMatch(SLUG_PATTERN);
  });

  it('cuts at maxLength without a trailing hyphen', () => {
    expect(slugify('abc def ghi', 'x', 4)).toBe('abc');
  });
});

describe('firstFreeSlug', () => {
  it('appends -2, -3, … until free', () => {
    expect(firstFreeSlug('welcome', new Set())).toBe('welcome');
    expect(firstFreeSlug('welcome', new Set(['welcome', 'welcome-2']))).toBe('welcome-3');
  });
});
