// Child names, as the host expects them (sdk/rust/src/naming.rs).

/** `<hikawa>-zundoko-007`: the index, zero-padded to at least three digits. */
export const zundokoName = (hikawa, index) => `${hikawa}-zundoko-${String(index).padStart(3, '0')}`;

/** `<hikawa>-kiyoshi`. */
export const kiyoshiName = (hikawa) => `${hikawa}-kiyoshi`;
