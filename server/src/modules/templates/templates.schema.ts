import { z } from 'zod';
import { paginationQuery } from '../../http/envelope.ts';
import { SLUG_PATTERN } from '../../slug.ts';
import { type VariablesLimits, variablesSchema } from '../rendering/index.ts';

const name = z.string().trim().min(1).max(100);
const slug = z
  .string()
  .min(1)
  .max(100)
  .regex(SLUG_PATTERN, 'must be lowercase letters, digits and hyphens (e.g. "welcome-email")');
const description = z.string().max(500);
const subject = z.string().min(1).max(998);
const designJson = z.record(z.string(), z.unknown());
const pdfFilename = z.string().trim().min(1).max(200).nullable();
/** Issue #11 built-in tracking (default off); a send's own `trackOpens`/`trackClicks` wins. */
const trackOpens = z.boolean().describe('Append an open-tracking pixel to the HTML at send (default false)');
const trackClicks = z
  .boolean()
  .describe('Rewrite http(s) links to signed click-tracking redirects at send (default false)');

export const createTemplateBody = z.object({
  name,
  slug: slug.optional(),
  description: description.optional(),
  subject,
  designJson,
  generatePdf: z.boolean().optional(),
  pdfFilename: pdfFilename.optional(),
  trackOpens: trackOpens.optional(),
  trackClicks: trackClicks.optional(),
});
export type CreateTemplateInput = z.infer<typeof createTemplateBody>;

export const updateTemplateBody = z.object({
  name: name.optional(),
  slug: slug.optional(),
  description: description.optional(),
  subject: subject.optional(),
  designJson: designJson.optional(),
  isActive: z.boolean().optional(),
  generatePdf: z.boolean().optional(),
  pdfFilename: pdfFilename.optional(),
  trackOpens: trackOpens.optional(),
  trackClicks: trackClicks.optional(),
});
export type UpdateTemplateInput = z.infer<typeof updateTemplateBody>;

export const templateIdParams = z.object({ id: z.string().min(1) });
export const templateVersionParams = z.object({ id: z.string().min(1), versionId: z.string().min(1) });

/** `POST /api/templates/:id/versions`: the body (absent arrives as null) and `name` are optional ("Version N" then). */
export const createVersionBody = z.object({ name: name.optional() }).nullish();
export type CreateVersionInput = z.infer<typeof createVersionBody>;

/**
 * `POST /api/templates/:id/preview` (spec: variables object, required), `variables` held to the
 * limits of a send (a preview renders as a send would).
 */
export function previewBodySchema(limits: VariablesLimits) {
  return z.object({ variables: variablesSchema(limits) });
}

export const templateListQuery = paginationQuery.extend({
  search: z.string().max(200).optional(),
  isActive: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional(),
});

export const templateListItem = z.object({
  id: z.string(),
  name: z.string(),
  slug: z.string(),
  description: z.string(),
  subject: z.string(),
  isActive: z.boolean(),
  generatePdf: z.boolean(),
  variables: z.array(z.string()),
  thumbnailUrl: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

export const templateView = templateListItem.extend({
  teamId: z.string(),
  designJson: z.record(z.string(), z.unknown()),
  compiledHtml: z.string(),
  currentVersionId: z.string().nullable(),
  pdfFilename: z.string().nullable(),
  trackOpens: z.boolean(),
  trackClicks: z.boolean(),
  createdBy: z.string().nullable(),
});
export type TemplateView = z.infer<typeof templateView>;

export const createdTemplateView = templateView.pick({
  id: true,
  name: true,
  slug: true,
  subject: true,
  isActive: true,
  createdAt: true,
});
export const updatedTemplateView = templateView.pick({
  id: true,
  name: true,
  subject: true,
  isActive: true,
  updatedAt: true,
});

export const duplicatedTemplateView = templateView.pick({
  id: true,
  name: true,
  slug: true,
  createdAt: true,
});

/** Spec "Template version": id, name, createdBy, createdAt. */
export const templateVersionView = z.object({
  id: z.string(),
  name: z.string(),
  createdBy: z.string().nullable(),
  createdAt: z.string(),
});
export type TemplateVersionView = z.infer<typeof templateVersionView>;
export const templateVersionList = z.array(templateVersionView);

/** Preview: what a send would deliver, plus the variables the caller left out (issue #4). */
export const previewView = z.object({
  html: z.string(),
  subject: z.string(),
  text: z.string(),
  missingVariables: z.array(z.string()),
});
export type PreviewView = z.infer<typeof previewView>;
