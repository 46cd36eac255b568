import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

/**
 * A widget that works only while it is on screen: `onScreen()` when it is shown, or attached
 * while visible; `offScreen()` when it is hidden or detached. The sidebar, a notebook's job card
 * and a log view hold the page's model live this way, so nothing is asked for what nobody sees.
 */
export abstract class OnScreenWidget extends Widget {
  protected onAfterShow(msg: Message): void {
    this.onScreen();
  }

  protected onAfterAttach(msg: Message): void {
    if (this.isVisible) {
      this.onScreen();
    }
  }

  protected onBeforeHide(msg: Message): void {
    this.offScreen();
  }

  protected onBeforeDetach(msg: Message): void {
    this.offScreen();
  }

  /** Take what the widget needs (acquiring the model, a poll); called again while shown. */
  protected abstract onScreen(): void;

  /** Give it back; safe to call when nothing is held. */
  protected abstract offScreen(): void;
}
