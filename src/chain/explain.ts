/** Turns viem's errors into one readable line: the revert reason, or why the chain was not reached. */
import { BaseError, ContractFunctionRevertedError, HttpRequestError, InsufficientFundsError } from "viem";

export function explainChainError(err: unknown): string {
  if (!(err instanceof BaseError)) return (err as Error)?.message ?? String(err);
  const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError);
  if (reverted instanceof ContractFunctionRevertedError) {
    const name = reverted.data?.errorName ?? reverted.reason ?? "unknown reason";
    const args = reverted.data?.args?.map((a) => String(a)).join(", ") ?? "";
    return `the contract refused: ${name}(${args})`;
  }
  if (err.walk((e) => e instanceof InsufficientFundsError)) return "the sending account has too little currency for this transaction and its gas";
  const http = err.walk((e) => e instanceof HttpRequestError);
  if (http instanceof HttpRequestError) return `cannot reach the chain at ${http.url}: ${http.details}`;
  return err.shortMessage;
}
