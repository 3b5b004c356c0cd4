/**
 * The gateway's own age identity (D20): what priced encrypted entries escrow their file keys to,
 * so the gateway can write each buyer's share. STOWAGE_AGE_IDENTITY (a cluster sets one for all
 * its gateways), else the key generated in data/secrets. A bad configured value stops the start.
 */
import { ConfigError } from "../config.ts";
import { AgeError, identityFromBytes, identityToRecipient } from "../sdk/age.ts";

export function gatewayIdentity(configured: string | undefined, generated: Uint8Array | undefined): string {
  if (configured) {
    try {
      identityToRecipient(configured);
    } catch (err) {
      if (err instanceof AgeError) throw new ConfigError(`STOWAGE_AGE_IDENTITY: ${err.message}`);
      throw err;
    }
    return configured.trim();
  }
  if (!generated) throw new ConfigError("no age identity: set STOWAGE_AGE_IDENTITY, or let the gateway generate one in data/secrets");
  return identityFromBytes(generated);
}
