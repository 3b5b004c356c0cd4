/**
 * The lock between uploads and chunk deletion, held per chunk instead of over the whole store, so
 * a delete never waits for a 10 GiB upload and an upload never waits for a sweep.
 *
 * - An upload pins a chunk's hash (synchronously) BEFORE it looks whether the chunk file exists,
 *   and unpins it only after its manifest committed (the row now keeps the chunk) or after abort.
 * - Whoever deletes a chunk file (release, abort, sweep) decides and unlinks in one synchronous
 *   step: not pinned, no row in `dfs_chunks` (bun:sqlite answers synchronously), `unlinkSync`.
 *
 * JavaScript runs that step without interleaving, so either the delete happened before the pin
 * (the upload then finds no file and writes it again) or the pin came first (the file is kept).
 * Temporary files are guarded the same way: a live upload registers the temp name before it
 * creates the file. This holds for one process per data directory, which the server's data-dir
 * lock guarantees (DESIGN.md 4).
 */
export class Pins {
  private readonly hashes = new Map<string, number>();
  private readonly temps = new Set<string>();

  pin(hash: string): void {
    this.hashes.set(hash, (this.hashes.get(hash) ?? 0) + 1);
  }

  unpin(hash: string): void {
    const n = (this.hashes.get(hash) ?? 0) - 1;
    if (n > 0) this.hashes.set(hash, n);
    else this.hashes.delete(hash);
  }

  isPinned(hash: string): boolean {
    return this.hashes.has(hash);
  }

  addTemp(path: string): void {
    this.temps.add(path);
  }

  removeTemp(path: string): void {
    this.temps.delete(path);
  }

  isLiveTemp(path: string): boolean {
    return this.temps.has(path);
  }

  /** Pinned chunks, for health. */
  get size(): number {
    return this.hashes.size;
  }
}
