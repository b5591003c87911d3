// Package dlimage exchanges the standard library's images (package image)
// as DLPack tensors, without copying whenever DLPack can describe the
// pixels as they lie in memory.
//
//   - Into a tensor, no copy: FromImage(img), FromYCbCr(img).
//   - Out of a tensor, sharing memory: ToGray, ToAlpha, ToRGBA, ToNRGBA, ToCMYK.
//   - Copies: CopyToGray, CopyToRGBA, CopyToNRGBA (any layout, to an image);
//     CopyFromGray16, CopyFromRGBA64, CopyFromNRGBA64, CopyFromPalette (an
//     image or palette to a new array).
//
// Out of Go: FromImage gives the tensor of an 8-bit image's
// Pix slice, FromYCbCr the three tensors of a *image.YCbCr. A *Tensor
// implements dlpack.Source and dlpack.Producer, so dlpack.Produce,
// dlpack.From and the pycapsule helpers take it as it is. The shapes are
// row-major, height first, as NumPy and Pillow write them:
//
//	*image.Gray, *image.Alpha           (H, W)     uint8, strides (Stride, 1)
//	*image.Paletted                     (H, W)     uint8 palette indices (CopyFromPalette copies the colours)
//	*image.RGBA, *image.NRGBA           (H, W, 4)  uint8, strides (Stride, 4, 1)
//	*image.CMYK                         (H, W, 4)  uint8, strides (Stride, 4, 1)
//	*image.YCbCr (FromYCbCr)            Y (H, W); Cb, Cr (CH, CW) at the chroma resolution
//	*image.Gray16                       CopyFromGray16:  (H, W)    uint16 copy, native byte order
//	*image.RGBA64, *image.NRGBA64       CopyFromRGBA64, CopyFromNRGBA64: (H, W, 4) uint16 copy
//
// A sub-image (SubImage) is exported through the data pointer and the row
// stride of its parent: never a copy. The 16-bit types keep big-endian
// bytes in Pix, which DLPack cannot describe; FromImage refuses them
// (ErrBigEndian) and the Copy functions convert them, explicitly.
//
// Into Go: ToGray, ToAlpha, ToRGBA, ToNRGBA and ToCMYK wrap a writable
// uint8 CPU tensor of shape (H, W) or (H, W, 4) whose inner strides are
// packed (1, or 4 and 1) and whose row stride is at least the row's bytes.
// The image shares the tensor's memory and takes the tensor over: it is
// released when the image becomes unreachable, so do not Close the
// Foreign while the image is in use (as package dlgonum does for
// matrices), and give them owned imports (Import, From), not the scoped
// Foreign of a Borrow. Read-only tensors are refused with dlpack.ErrReadOnly rather
// than made writable. Other layouts, (H, W, 3), channel-first (C, H, W) or
// any strides, go through CopyToGray, CopyToRGBA and CopyToNRGBA, which leave the
// Foreign to the caller.
package dlimage
