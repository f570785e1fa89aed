//! `/nodes/{node}/storage/*`: list, content, upload, delete.

use bytes::Bytes;

use super::{opt_upid, upid};
use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::task::Upid;
use crate::proxmox::types::{DownloadUrlRequest, NodeStorage, StorageContent, StorageListQuery, VolumeInfo};
use crate::proxmox::{Client, to_body, to_query};

fn storage_path(node: &str, storage: &str) -> ApiPath {
    ApiPath::node(node).lit("storage").param("storage", storage)
}

impl Client {
    /// `GET /nodes/{node}/storage`.
    pub async fn node_storages(
        &self,
        node: &str,
        query: &StorageListQuery,
    ) -> Result<Vec<NodeStorage>, Error> {
        self.get(&ApiPath::node(node).lit("storage"), &to_query(query)?)
            .await
    }

    /// `GET /nodes/{node}/storage/{storage}/content[?content=..]`.
    pub async fn storage_content(
        &self,
        node: &str,
        storage: &str,
        content: Option<&str>,
    ) -> Result<Vec<StorageContent>, Error> {
        let q: Vec<(String, String)> = content
            .map(|c| ("content".to_owned(), c.to_owned()))
            .into_iter()
            .collect();
        self.get(&storage_path(node, storage).lit("content"), &q).await
    }

    /// `GET /nodes/{node}/storage/{storage}/content/{volume}` (volume = full volid).
    pub async fn storage_volume(&self, node: &str, storage: &str, volid: &str) -> Result<VolumeInfo, Error> {
        self.get(
            &storage_path(node, storage).lit("content").param("volume", volid),
            &[],
        )
        .await
    }

    /// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`: the `imgdel` task, or `None`
    /// if PVE finished synchronously.
    pub async fn delete_storage_volume(
        &self,
        node: &str,
        storage: &str,
        volid: &str,
    ) -> Result<Option<Upid>, Error> {
        opt_upid(
            self.delete(
                &storage_path(node, storage).lit("content").param("volume", volid),
                &[],
            )
            .await?,
        )
    }

    /// `POST /nodes/{node}/storage/{storage}/upload` (multipart: `content` first, then the file
    /// part named `filename`). Returns the `imgcopy` task.
    pub async fn upload_to_storage(
        &self,
        node: &str,
        storage: &str,
        content: &str,
        file_name: &str,
        data: Bytes,
    ) -> Result<Upid, Error> {
        upid(
            self.upload(
                &storage_path(node, storage).lit("upload"),
                content,
                file_name,
                data,
            )
            .await?,
        )
    }

    /// `POST /nodes/{node}/storage/{storage}/download-url`: Proxmox downloads a file (an ISO, a
    /// container template or an image to import) itself; returns the `download` task.
    pub async fn download_url(
        &self,
        node: &str,
        storage: &str,
        req: &DownloadUrlRequest,
    ) -> Result<Upid, Error> {
        upid(
            self.post(&storage_path(node, storage).lit("download-url"), to_body(req)?)
                .await?,
        )
    }

    /// Uploads an ISO image (`content=iso`).
    pub async fn upload_iso(
        &self,
        node: &str,
        storage: &str,
        file_name: &str,
        data: Bytes,
    ) -> Result<Upid, Error> {
        self.upload_to_storage(node, storage, "iso", file_name, data)
            .await
    }
}
