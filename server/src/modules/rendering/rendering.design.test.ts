import { describe, expect, it } from 'vitest';
import { AppError } from '../../http/errors.ts';
import { parseDesign } from './index.ts';
import { MAX_NESTING_DEPTH } from './rendering.design.ts';
import {
  buildDesign,
  containerBlock,
  loadFixtures,
  type RawBlock,
  textBlock,
} from './rendering.factories.ts';

/** The INVALID_TEMPLATE error `fn` throws (fails the test if it throws anything else). */
function templateError(fn: () => unknown): AppError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('INVALID_TEMPLATE');
    return error as AppError;
  }
  throw new Error('expected INVALID_TEMPLATE, nothing was thrown');
}

function issuePaths(error: AppError): string[] {
  return (error.details.issues as { path: string }[]).map((issue) => issue.path);
}

describe('parseDesign', () => {
  it('accepts every sample document and keeps its blocks', () => {
    const fixtures = loadFixtures();
    expect(fixtures.length).toBeGreaterThanOrEqual(5);
    for (const { name, design } of fixtures) {
      const parsed = parseDesign(design);
      expect(Object.keys(parsed), name).toEqual(Object.keys(design));
      expect(parsed.root?.type, name).toBe('EmailLayout');
    }
  });

  it('rejects a document without a root, naming "root"', () => {
    const design: Record<string, RawBlock> = buildDesign([textBlock('hi')]);
    delete design.root;
    const error = templateError(() => parseDesign(design));
    expect(error.details.reason).toBe('INVALID_DESIGN');
    expect(issuePaths(error)).toContain('root');
  });

  it('rejects a root that is not an EmailLayout', () => {
    const error = templateError(() => parseDesign({ root: textBlock('hi') }));
    expect(issuePaths(error)).toContain('root.type');
  });

  it.each([null, 'text', [], 42])('rejects %j as a document', (input) => {
    expect(issuePaths(templateError(() => parseDesign(input)))).toEqual(['']);
  });

  it('rejects an unknown block type with the block path', () => {
    const design = buildDesign({ 'block-123': { type: 'Video', data: { props: { url: 'x' } } } });
    const error = templateError(() => parseDesign(design));
    expect(issuePaths(error)).toEqual(['block-123.type']);
    expect(JSON.stringify(error.details)).toContain('Video');
  });

  it('rejects a child id that names no block', () => {
    const design = buildDesign({
      'block-1': containerBlock(['block-2', 'ghost']),
      'block-2': textBlock('x'),
    });
    expect(issuePaths(templateError(() => parseDesign(design)))).toEqual([
      'block-1.data.props.childrenIds.1',
    ]);
  });

  it('rejects a dangling id in a column of a ColumnsContainer', () => {
    const columns = {
      type: 'ColumnsContainer',
      data: { props: { columns: [{ childrenIds: [] }, { childrenIds: ['nope'] }] } },
    };
    const design = buildDesign({ cols: columns });
    expect(issuePaths(templateError(() => parseDesign(design)))).toEqual([
      'cols.data.props.columns.1.childrenIds.0',
    ]);
  });

  it('rejects a prop of the wrong type with the path of the prop', () => {
    const design = buildDesign({ 'block-123': textBlock(42 as unknown as string) });
    const error = templateError(() => parseDesign(design));
    expect(issuePaths(error)).toEqual(['block-123.data.props.text']);
  });

  it('rejects a malformed colour and a padding given as a string', () => {
    const block: RawBlock = {
      type: 'Text',
      data: { style: { color: 'red', padding: '4px' }, props: { text: 'x' } },
    };
    const paths = issuePaths(templateError(() => parseDesign(buildDesign({ b: block }))));
    expect(paths.sort()).toEqual(['b.data.style.color', 'b.data.style.padding']);
  });

  it('keeps style keys it does not know', () => {
    const block: RawBlock = { type: 'Text', data: { style: { letterSpacing: 2 }, props: { text: 'x' } } };
    const parsed = parseDesign(buildDesign({ b: block }));
    expect(parsed.b?.data).toMatchObject({ style: { letterSpacing: 2 } });
  });

  it('rejects a cycle between containers', () => {
    const design = buildDesign({ a: containerBlock(['b']), b: containerBlock(['a']) }, ['a']);
    const error = templateError(() => parseDesign(design));
    expect(issuePaths(error)).toEqual(['b.data.props.childrenIds.0']);
    expect(JSON.stringify(error.details)).toContain('cycle');
  });

  it('rejects a block referenced twice (shared subtrees would multiply the output)', () => {
    const design = buildDesign({ a: containerBlock(['t', 't']), t: textBlock('x') }, ['a']);
    expect(issuePaths(templateError(() => parseDesign(design)))).toEqual(['a.data.props.childrenIds.1']);
  });

  it(`accepts ${MAX_NESTING_DEPTH} levels of nesting and rejects one more`, () => {
    const nested = (levels: number) => {
      const blocks: Record<string, RawBlock> = {};
      for (let level = 1; level < levels; level++) blocks[`c${level}`] = containerBlock([`c${level + 1}`]);
      blocks[`c${levels}`] = textBlock('deep');
      return buildDesign(blocks, ['c1']);
    };
    expect(() => parseDesign(nested(MAX_NESTING_DEPTH))).not.toThrow();
    const error = templateError(() => parseDesign(nested(MAX_NESTING_DEPTH + 1)));
    expect(issuePaths(error)).toEqual([`c${MAX_NESTING_DEPTH}.data.props.childrenIds.0`]);
  });

  it('accepts blocks no one references (the editor leaves some) without rendering them', () => {
    const design = { ...buildDesign([textBlock('shown')]), orphan: textBlock('not shown') };
    expect(Object.keys(parseDesign(design))).toContain('orphan');
  });
});
