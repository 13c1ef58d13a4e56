import type { Executor } from '../../db/client.ts';
import { compileTemplateCached } from '../rendering/index.ts';
import type { PreviewView } from './templates.schema.ts';
import { getTemplate } from './templates.service.ts';

/**
 * Renders a template (id or slug) with `variables` exactly as a send would: the same compiled
 * template (`compileTemplateCached`) over the template's current subject and design, which is what
 * a send snapshots and delivers. While the content equals the current version, the compiled template is
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
  const compiled = compileTemplateCached({
    subject: template.subject,
    designJson: template.designJson,
    ...(cacheKey ? { cacheKey } : {}),
  });
  const rendered = await compiled.render(variables);
  return { ...rendered, missingVariables: compiled.missingVariables(variables) };
}
