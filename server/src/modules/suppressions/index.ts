export { suppressionRoutes } from './suppressions.routes.ts';
export { addSuppression, addSuppressions, findSuppression, suppressionKey } from './suppressions.service.ts';
