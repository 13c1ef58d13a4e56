export { providerEventRoutes } from './provider-events.routes.ts';
export { applyProviderEvents, PROVIDER_EVENT_PARSERS } from './provider-events.service.ts';
