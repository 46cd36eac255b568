/** The panel's icon: a GPU board, drawn in the theme's icon colour. */
import { LabIcon } from '@jupyterlab/ui-components';

const svgstr = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="currentColor">
    <path d="M2 6h18a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2h-3v2h-2v-2H9v2H7v-2H4v2H2zm2 2v8h16V8z"/>
    <path d="M7 9.5h6v5H7zm8 0h3v2h-3zm0 3h3v2h-3z"/>
  </g>
</svg>`;

export const gpuIcon = new LabIcon({ name: 'jupyter-elastic-gpu:gpu', svgstr });
