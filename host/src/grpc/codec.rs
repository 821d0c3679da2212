//! tonic's prost codec with a small first buffer per stream.
//!
//! tonic gives every call's encoder and decoder an 8 KiB buffer up front. A hub holds one
//! Subscribe stream per agent for hours, and most events are far smaller: with one connection
//! per agent, 8 KiB per stream is a quarter of what an idle agent costs. The buffers still grow
//! to the largest message they carry (the receive limit bounds that), so only the resting size
//! changes.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// The first size of each call's encode and decode buffer.
const FIRST_BUFFER: usize = 1024;
/// tonic's default: flush what is encoded once this much is buffered.
const YIELD_THRESHOLD: usize = 32 * 1024;

fn settings() -> BufferSettings {
    BufferSettings::new(FIRST_BUFFER, YIELD_THRESHOLD)
}

/// [`ProstCodec`] with [`FIRST_BUFFER`]-byte buffers (named by `build.rs` as the server's codec).
pub struct LeanCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for LeanCodec<T, U> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<T, U> Codec for LeanCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
