/** The `data.text` of the benches' messages: ~160 characters, a typical chat line. */
export const MESSAGE_TEXT = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(3).slice(0, 160);
