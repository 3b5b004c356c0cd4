/** ERC-1056 delegate types, as the registry stores them: the name right-padded to bytes32. */
import { stringToHex } from "viem";

export const DELEGATE_TYPES = {
  sigAuth: stringToHex("sigAuth", { size: 32 }),
  veriKey: stringToHex("veriKey", { size: 32 }),
} as const;

export type DelegateType = keyof typeof DELEGATE_TYPES;
