export { suppressionRoutes } from './suppressions.routes.ts';
export { findSuppression, suppressionKey } from './suppressions.service.ts';
