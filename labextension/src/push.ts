/**
 * The push channel: the API's websocket, subscribed to the panel view (`ws?view=panel`).
 * It reconnects with exponential backoff while someone wants updates, and says whether it is
 * live (a message arrived since it opened) so that the model polls only when it is not.
 */
import { ElasticGpuApi } from './api';

export interface IPushOptions {
  api: ElasticGpuApi;
  /** Called with every parsed message. */
  onMessage: (message: any) => void;
  /** Called when the channel stops being live or an attempt failed (`wasLive` says which). */
  onDown: (wasLive: boolean) => void;
  /** First reconnection delay, doubled after each failure up to `maxDelay` (ms). */
  minDelay?: number;
  maxDelay?: number;
  /** How long an open socket may stay silent before it counts as failed (ms). */
  connectTimeout?: number;
}

export class PushChannel {
  constructor(private readonly options: IPushOptions) {
    this._delay = options.minDelay ?? 1000;
  }

  /** True once a message arrived on the open socket. */
  get live(): boolean {
    return this._live;
  }

  /** True while a socket is open but no message came yet (the poll waits for it). */
  get pending(): boolean {
    return this._socket !== null && !this._live;
  }

  /** Open the socket now unless one is open or a reconnection is due. */
  open(): void {
    this._wanted = true;
    if (this._socket || this._timer !== null) {
      return;
    }
    let socket: WebSocket;
    try {
      socket = this.options.api.connect({ view: 'panel' });
    } catch {
      this._retry();
      return;
    }
    this._socket = socket;
    this._silence = setTimeout(() => {
      if (this._socket === socket && !this._live) {
        this._fail(socket);
      }
    }, this.options.connectTimeout ?? 5000);
    socket.onmessage = event => {
      if (this._socket !== socket) {
        return;
      }
      this._clearSilence();
      let message: any;
      try {
        message = JSON.parse(String(event.data));
      } catch {
        return;
      }
      this._live = true;
      this._delay = this.options.minDelay ?? 1000;
      this.options.onMessage(message);
    };
    socket.onclose = () => {
      if (this._socket === socket) {
        this._fail(socket);
      }
    };
  }

  /** Close the socket and cancel any reconnection (nothing is requested until `open`). */
  close(): void {
    this._wanted = false;
    if (this._timer !== null) {
      clearTimeout(this._timer);
      this._timer = null;
    }
    const socket = this._socket;
    if (socket) {
      this._drop();
      socket.onclose = null;
      socket.onmessage = null;
      socket.close();
    }
  }

  /** Close and open again at once: the server sends a fresh snapshot. */
  restart(): void {
    this.close();
    this.open();
  }

  /** The socket closed, was refused, or stayed silent: try again later. */
  private _fail(socket: WebSocket): void {
    socket.onclose = null;
    socket.onmessage = null;
    socket.close();
    this._drop();
    if (this._wanted) {
      this._retry();
    }
  }

  private _clearSilence(): void {
    if (this._silence !== null) {
      clearTimeout(this._silence);
      this._silence = null;
    }
  }

  private _drop(): void {
    this._clearSilence();
    const wasLive = this._live;
    this._socket = null;
    this._live = false;
    if (wasLive || this._wanted) {
      this.options.onDown(wasLive);
    }
  }

  private _retry(): void {
    const delay = this._delay;
    this._delay = Math.min(this._delay * 2, this.options.maxDelay ?? 60000);
    this._timer = setTimeout(() => {
      this._timer = null;
      if (this._wanted) {
        this.open();
      }
    }, delay);
  }

  private _socket: WebSocket | null = null;
  private _live = false;
  private _wanted = false;
  private _delay: number;
  private _timer: ReturnType<typeof setTimeout> | null = null;
  private _silence: ReturnType<typeof setTimeout> | null = null;
}
