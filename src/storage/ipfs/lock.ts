/**
 * A shared/exclusive async lock: imports (and uploads waiting for commit or abort) hold it
 * shared, garbage collection exclusive, so gc never sweeps blocks an upload just wrote and has not
 * pinned yet.
 *
 * Shared holders never wait for a queued exclusive one: gc only runs at start, when nothing else
 * holds the lock, and an upload that waited for gc while an earlier upload of the same request
 * waited for commit could deadlock.
 */
export type Release = () => void;

export class SharedExclusiveLock {
  #shared = 0;
  #exclusive = false;
  readonly #waiters: Array<{ exclusive: boolean; grant: () => void }> = [];

  shared(): Promise<Release> {
    return this.#acquire(false);
  }

  exclusive(): Promise<Release> {
    return this.#acquire(true);
  }

  /** For tests and debugging. */
  get state(): { shared: number; exclusive: boolean; waiting: number } {
    return { shared: this.#shared, exclusive: this.#exclusive, waiting: this.#waiters.length };
  }

  #acquire(exclusive: boolean): Promise<Release> {
    return new Promise((resolve) => {
      const grant = () => {
        if (exclusive) this.#exclusive = true;
        else this.#shared++;
        resolve(this.#releaser(exclusive));
      };
      if (this.#canGrant(exclusive)) grant();
      else this.#waiters.push({ exclusive, grant });
    });
  }

  #canGrant(exclusive: boolean): boolean {
    return exclusive ? !this.#exclusive && this.#shared === 0 : !this.#exclusive;
  }

  #releaser(exclusive: boolean): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (exclusive) this.#exclusive = false;
      else this.#shared--;
      this.#wake();
    };
  }

  #wake(): void {
    for (let i = 0; i < this.#waiters.length; ) {
      const w = this.#waiters[i]!;
      if (!this.#canGrant(w.exclusive)) {
        i++;
        continue;
      }
      this.#waiters.splice(i, 1);
      w.grant();
    }
  }
}
