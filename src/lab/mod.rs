//! The lab: real kernels booted under QEMU (TCG) with an initramfs bootlink builds itself.
