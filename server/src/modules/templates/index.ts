export type { TemplateRow, TemplateVersionRow } from './templates.repository.ts';
export { templateRoutes } from './templates.routes.ts';
export { findTemplateVersions, getTemplateVersion, resolveTemplateForSend } from './templates.service.ts';
