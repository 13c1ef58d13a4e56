import { z } from 'zod';
import { SLUG_PATTERN } from '../../slug.ts';

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

export const createTemplateBody = z.object({
  name,
  slug: slug.optional(),
  description: description.optional(),
  subject,
  designJson,
  generatePdf: z.boolean().optional(),
  pdfFilename: pdfFilename.optional(),
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
});
export type UpdateTemplateInput = z.infer<typeof updateTemplateBody>;

export const templateIdParams = z.object({ id: z.string().min(1) });

export const templateListQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  pageSize: z.coerce.number().int().min(1).max(100).default(20),
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
