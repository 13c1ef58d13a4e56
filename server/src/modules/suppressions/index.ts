export { suppressionRoutes } from './suppressions.routes.ts';
export { addSuppression, findSuppression, suppressionKey } from './suppressions.service.ts';
