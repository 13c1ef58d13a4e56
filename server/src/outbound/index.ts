export {
  type AddressClass,
  ALLOW_PRIVATE_VARIABLE,
  classifyAddress,
  DEFAULT_OUTBOUND_POLICY,
  type OutboundPolicy,
  refusalOf,
} from './address-policy.ts';
export { type ConnectOutboundOptions, connectOutbound } from './outbound-connect.ts';
export { createOutboundLookup, OutboundRefusedError, resolveOutbound } from './outbound-lookup.ts';
