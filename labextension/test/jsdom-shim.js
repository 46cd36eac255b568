// What Lumino needs of a browser that jsdom lacks (only for the DOM tests).
if (typeof window !== 'undefined' && typeof window.DragEvent === 'undefined') {
  window.DragEvent = class DragEvent extends window.MouseEvent {};
}
