/**
 * Validation of EmailBuilder.js documents before anything renders them: the renderer
 * crashes on an unknown block type or a missing root (ARCHITECTURE.md, "Known traps"),
 * and a document shared between tenants must not be able to loop or explode it.
 */
import { AppError, type ValidationIssue } from '../../http/errors.ts';
import {
  BLOCK_DATA_SCHEMAS,
  BLOCK_TYPES,
  childReferencesOf,
  type EmailBlock,
  type EmailDesign,
  isBlockType,
} from './rendering.schema.ts';

/** Id of the document's EmailLayout block, the one `renderToStaticMarkup` starts from. */
export const ROOT_BLOCK_ID = 'root';
/** Deepest allowed nesting below the root (the root is level 0). */
export const MAX_NESTING_DEPTH = 20;
/** Most blocks one document may hold (the editor's real documents hold under 100). */
export const MAX_BLOCKS = 5000;
/** Most issues reported in one error, so a broken document does not make a huge response. */
const MAX_REPORTED_ISSUES = 50;

/** Why a template was rejected, in `details.reason` of an INVALID_TEMPLATE error. */
export type TemplateErrorReason = 'INVALID_DESIGN' | 'SYNTAX_ERROR' | 'RENDER_ERROR' | 'LIMIT_EXCEEDED';

/** The one shape of every rendering error: 400 INVALID_TEMPLATE with `{reason, issues}`. */
export function invalidTemplate(reason: TemplateErrorReason, issues: ValidationIssue[]): AppError {
  const messages: Record<TemplateErrorReason, string> = {
    INVALID_DESIGN: 'Template design is invalid',
    SYNTAX_ERROR: 'Template has a Liquid syntax error',
    RENDER_ERROR: 'Template could not be rendered',
    LIMIT_EXCEEDED: 'Template exceeds a rendering limit',
  };
  return new AppError('INVALID_TEMPLATE', messages[reason], {
    reason,
    issues: issues.slice(0, MAX_REPORTED_ISSUES),
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Validates an EmailBuilder.js document (root `root` of type EmailLayout, other blocks keyed by
 * id and linked through `childrenIds`) and returns it with every block's `data` parsed by our
 * zod schema (rendering.schema.ts: strict on known keys' types, unknown keys kept).
 *
 * Checks: the input is an object of at most {@link MAX_BLOCKS} blocks; `root` exists and is an
 * EmailLayout; every block type is known; every `childrenIds` entry names an existing block;
 * every block reachable from the root is referenced once (no cycles, no shared subtrees) and
 * sits at most {@link MAX_NESTING_DEPTH} levels deep. Unreachable blocks are allowed (the editor
 * leaves some) and are validated but never rendered.
 *
 * @throws AppError INVALID_TEMPLATE with `details = {reason: 'INVALID_DESIGN', issues: [{path, message}]}`,
 *   where `path` names the bad spot, e.g. `block-123.data.props.text` or `root.data.childrenIds.2`
 *   (`reason: 'LIMIT_EXCEEDED'` when there are too many blocks).
 */
export function parseDesign(input: unknown): EmailDesign {
  if (!isRecord(input)) {
    throw invalidTemplate('INVALID_DESIGN', [
      { path: '', message: 'Expected an object of blocks keyed by id' },
    ]);
  }
  const entries = Object.entries(input);
  if (entries.length > MAX_BLOCKS) {
    throw invalidTemplate('LIMIT_EXCEEDED', [
      {
        path: '',
        message: `A design may hold at most ${MAX_BLOCKS} blocks, this one holds ${entries.length}`,
      },
    ]);
  }
  const issues: ValidationIssue[] = [];
  const blocks: [string, EmailBlock][] = [];
  for (const [id, raw] of entries) {
    const block = parseBlock(id, raw, issues);
    if (block) blocks.push([id, block]);
  }
  const root = input[ROOT_BLOCK_ID];
  if (root === undefined) {
    issues.unshift({ path: ROOT_BLOCK_ID, message: 'Missing root block "root"' });
  } else if (isRecord(root) && isBlockType(root.type) && root.type !== 'EmailLayout') {
    issues.unshift({ path: `${ROOT_BLOCK_ID}.type`, message: 'The root block must be of type EmailLayout' });
  }
  if (issues.length > 0) throw invalidTemplate('INVALID_DESIGN', issues);

  // fromEntries defines own properties, so an id like "__proto__" stays a plain key.
  const design: EmailDesign = Object.fromEntries(blocks);
  checkLinks(design, issues);
  if (issues.length > 0) throw invalidTemplate('INVALID_DESIGN', issues);
  return design;
}

function parseBlock(id: string, raw: unknown, issues: ValidationIssue[]): EmailBlock | undefined {
  if (!isRecord(raw)) {
    issues.push({ path: id, message: 'Expected a block object {type, data}' });
    return undefined;
  }
  if (!isBlockType(raw.type)) {
    issues.push({
      path: `${id}.type`,
      message: `Unknown block type ${JSON.stringify(raw.type) ?? 'undefined'}; expected one of ${BLOCK_TYPES.join(', ')}`,
    });
    return undefined;
  }
  const result = BLOCK_DATA_SCHEMAS[raw.type].safeParse(raw.data);
  if (!result.success) {
    for (const issue of result.error.issues) {
      issues.push({ path: [id, 'data', ...issue.path.map(String)].join('.'), message: issue.message });
    }
    return undefined;
  }
  return { ...raw, type: raw.type, data: result.data } as EmailBlock;
}

/** Dangling ids anywhere; then, from the root down, cycles, shared blocks and depth. */
function checkLinks(design: EmailDesign, issues: ValidationIssue[]): void {
  for (const [id, block] of Object.entries(design)) {
    for (const ref of childReferencesOf(block)) {
      if (!Object.hasOwn(design, ref.id)) {
        issues.push({ path: `${id}.${ref.path}`, message: `Unknown block id ${JSON.stringify(ref.id)}` });
      }
    }
  }
  if (issues.length > 0) return;

  const seen = new Set<string>([ROOT_BLOCK_ID]);
  const onPath = new Set<string>();
  const visit = (id: string, depth: number): void => {
    onPath.add(id);
    for (const ref of childReferencesOf(design[id]!)) {
      const path = `${id}.${ref.path}`;
      if (onPath.has(ref.id)) {
        issues.push({ path, message: `Block ${JSON.stringify(ref.id)} contains itself (cycle)` });
      } else if (seen.has(ref.id)) {
        issues.push({ path, message: `Block ${JSON.stringify(ref.id)} is referenced more than once` });
      } else if (depth + 1 > MAX_NESTING_DEPTH) {
        issues.push({ path, message: `Blocks may be nested at most ${MAX_NESTING_DEPTH} levels deep` });
      } else {
        seen.add(ref.id);
        visit(ref.id, depth + 1);
      }
    }
    onPath.delete(id);
  };
  visit(ROOT_BLOCK_ID, 0);
}

/** Ids of the blocks reachable from the root, in render order (the design must be validated). */
export function reachableBlockIds(design: EmailDesign): string[] {
  const order: string[] = [];
  const seen = new Set<string>();
  const visit = (id: string): void => {
    const block = design[id];
    if (!block || seen.has(id)) return;
    seen.add(id);
    order.push(id);
    for (const ref of childReferencesOf(block)) visit(ref.id);
  };
  visit(ROOT_BLOCK_ID);
  return order;
}
