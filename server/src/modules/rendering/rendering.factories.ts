/**
 * Test factories for the rendering module: small EmailBuilder.js documents built in code, and
 * the real documents of `server/test/fixtures/emailbuilder/` (EmailBuilder.js samples, MIT, Waypoint;
 * their licence is in that folder).
 * Used by the *.test.ts files beside it and by scripts/bench-render.ts; not part of index.ts.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** Folder of the sample documents (in the repository); EMAILBUILDER_FIXTURES overrides it. */
export const FIXTURES_DIR =
  process.env.EMAILBUILDER_FIXTURES ??
  path.resolve(import.meta.dirname, '../../../test/fixtures/emailbuilder');

/** Every sample document, by file name (`welcome.json`), freshly parsed on each call. */
export function loadFixtures(): { name: string; design: Record<string, RawBlock> }[] {
  return readdirSync(FIXTURES_DIR)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => ({ name, design: JSON.parse(readFileSync(path.join(FIXTURES_DIR, name), 'utf8')) }));
}

/** One sample document by file name. */
export function loadFixture(name: string): Record<string, RawBlock> {
  return JSON.parse(readFileSync(path.join(FIXTURES_DIR, name), 'utf8'));
}

/** A block as stored: loosely typed, so tests can also build invalid documents. */
export interface RawBlock {
  type: string;
  data: Record<string, unknown> & { props?: Record<string, unknown>; childrenIds?: string[] };
}

/**
 * A document holding `blocks` (ids `b1`, `b2`, … unless given as entries) whose root lists
 * `rootChildren` (default: every block, in order).
 */
export function buildDesign(
  blocks: RawBlock[] | Record<string, RawBlock>,
  rootChildren?: string[],
): Record<string, RawBlock> {
  const entries = Array.isArray(blocks)
    ? blocks.map((block, index): [string, RawBlock] => [`b${index + 1}`, block])
    : Object.entries(blocks);
  return {
    root: { type: 'EmailLayout', data: { childrenIds: rootChildren ?? entries.map(([id]) => id) } },
    ...Object.fromEntries(entries),
  };
}

export function textBlock(text: string, props: Record<string, unknown> = {}): RawBlock {
  return {
    type: 'Text',
    data: { style: { padding: { top: 0, bottom: 0, left: 0, right: 0 } }, props: { text, ...props } },
  };
}

export function headingBlock(text: string): RawBlock {
  return { type: 'Heading', data: { props: { text, level: 'h1' } } };
}

export function htmlBlock(contents: string): RawBlock {
  return { type: 'Html', data: { props: { contents } } };
}

export function buttonBlock(text: string, url: string): RawBlock {
  return { type: 'Button', data: { props: { text, url } } };
}

export function imageBlock(url: string, linkHref?: string, alt = 'image'): RawBlock {
  return { type: 'Image', data: { props: { url, alt, ...(linkHref === undefined ? {} : { linkHref }) } } };
}

export function containerBlock(childrenIds: string[]): RawBlock {
  return { type: 'Container', data: { props: { childrenIds } } };
}

/** Id of the first Text block in render order of a document's root (not inside containers). */
export function firstTextBlockId(design: Record<string, RawBlock>): string {
  const id = design.root?.data.childrenIds?.find((child) => design[child]?.type === 'Text');
  if (!id) throw new Error('The document has no Text block at the top level');
  return id;
}
