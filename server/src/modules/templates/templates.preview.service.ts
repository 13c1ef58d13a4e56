import type { Executor } from '../../db/client.ts';
import { renderTemplate } from '../rendering/index.ts';
import type { PreviewView } from './templates.schema.ts';
import { getTemplate } from './templates.service.ts';

/** One step of a variable path: a property name, an array index, or one we cannot resolve. */
type PathStep = { key: string } | { index: number } | { dynamic: true };

const STEP = /^(?:\.?([^.[\]]+)|\[(-?\d+)\]|\['([^']*)'\]|\["([^"]*)"\]|\[[^\]]*\])/;

/**
 * Splits a variable path as `extractVariables` reports it (`user.name`, `order.items[0].sku`,
 * `a['b c'].d`, `f[g.h].i`) into steps; a bracket holding an expression is `dynamic`.
 */
export function parseVariablePath(path: string): PathStep[] {
  const steps: PathStep[] = [];
  let rest = path;
  while (rest.length > 0) {
    const match = STEP.exec(rest);
    if (!match) return [...steps, { dynamic: true }];
    const [whole, name, index, single, double] = match;
    if (name !== undefined) steps.push({ key: name });
    else if (index !== undefined) steps.push({ index: Number(index) });
    else if (single !== undefined || double !== undefined) steps.push({ key: (single ?? double)! });
    else steps.push({ dynamic: true });
    rest = rest.slice(whole.length);
  }
  return steps;
}

/** One step the way Liquid takes it: own properties only, negative indexes, size/first/last. */
function stepInto(value: unknown, step: PathStep): unknown {
  if (value === null || value === undefined || 'dynamic' in step) return undefined;
  const sequence = Array.isArray(value) || typeof value === 'string' ? (value as ArrayLike<unknown>) : null;
  if ('index' in step) {
    if (!sequence) return undefined;
    return sequence[step.index < 0 ? sequence.length + step.index : step.index];
  }
  if (typeof value === 'object' && Object.hasOwn(value, step.key)) {
    return (value as Record<string, unknown>)[step.key];
  }
  if (sequence && step.key === 'size') return sequence.length;
  if (sequence && step.key === 'first') return sequence[0];
  if (sequence && step.key === 'last') return sequence[sequence.length - 1];
  return undefined;
}

/**
 * The variables of `used` (a template's `variables`) that render as nothing with `variables`:
 * "user.name" is missing when `user` or `user.name` is undefined (issue #4 "Preview"). A path
 * with a computed index (`items[i]`) is checked up to that index only.
 */
export function findMissingVariables(used: readonly string[], variables: Record<string, unknown>): string[] {
  return used.filter((path) => {
    let value: unknown = variables;
    for (const step of parseVariablePath(path)) {
      if ('dynamic' in step) return false;
      value = stepInto(value, step);
      if (value === undefined) return true;
    }
    return false;
  });
}

/**
 * Renders a template (id or slug) with `variables` exactly as a send would: the same
 * `renderTemplate` path over the template's current subject and design, which is what a send
 * snapshots and delivers. While the content equals the current version, the compiled template is
 * shared with sends through the version id cache key. Returns {html, subject, text,
 * missingVariables} (spec "Templates (session)" preview, issue #4 "Preview").
 * @throws NOT_FOUND for an unknown template; INVALID_TEMPLATE (400) with details.reason
 *   LIMIT_EXCEEDED or RENDER_ERROR when these variables make the render fail or exceed a limit.
 */
export async function previewTemplate(
  db: Executor,
  teamId: string,
  idOrSlug: string,
  variables: Record<string, unknown>,
): Promise<PreviewView> {
  const template = await getTemplate(db, teamId, idOrSlug);
  const cacheKey =
    template.hasUnversionedChanges || !template.currentVersionId ? undefined : template.currentVersionId;
  const rendered = await renderTemplate(
    { subject: template.subject, designJson: template.designJson, ...(cacheKey ? { cacheKey } : {}) },
    variables,
  );
  return { ...rendered, missingVariables: findMissingVariables(template.variables, variables) };
}
