//! Launch templates, fleets, describe and terminate against moto over the wire.

use super::*;

#[tokio::test]
async fn the_launch_template_holds_the_class_settings_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "lt-cluster");
    let class = class(
        "lt-class",
        &net,
        "  detailedMonitoring: true\n  associatePublicIPAddress: false\n  metadataOptions: {httpPutResponseHopLimit: 2}\n  blockDeviceMappings:\n  - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 100G, volumeType: gp3, encrypted: true, deleteOnTermination: true}}\n",
    );
    cloud
        .create(
            &claim("lt-claim", "lt-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();

    let templates = cloud
        .launch_templates()
        .list_for_class("lt-class")
        .await
        .unwrap();
    assert_eq!(templates.len(), 1, "{templates:?}");
    assert!(templates[0].name.starts_with("karpenter.k8s.aws/"));
    let described = clients
        .ec2
        .describe_launch_templates()
        .launch_template_names(&templates[0].name)
        .send()
        .await
        .unwrap();
    let template_tags = tags(described.launch_templates()[0].tags());
    assert_eq!(template_tags["eks:eks-cluster-name"], "lt-cluster");
    assert_eq!(template_tags["kubernetes.io/cluster/lt-cluster"], "owned");
    assert_eq!(template_tags["karpenter.k8s.aws/ec2nodeclass"], "lt-class");
    assert_eq!(template_tags["karpenter.sh/nodepool"], "general");
    assert_eq!(template_tags["team"], "web");
    assert!(
        !template_tags.contains_key("karpenter.sh/nodeclaim"),
        "templates are shared by claims"
    );

    let versions = clients
        .ec2
        .describe_launch_template_versions()
        .launch_template_name(&templates[0].name)
        .send()
        .await
        .unwrap();
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap();
    assert_eq!(data.image_id(), Some(net.image.as_str()));
    assert_eq!(
        data.iam_instance_profile().unwrap().name(),
        Some("nodes-profile")
    );
    assert_eq!(data.monitoring().unwrap().enabled(), Some(true));
    let metadata = data.metadata_options().unwrap();
    assert_eq!(metadata.http_tokens().map(|t| t.as_str()), Some("required"));
    assert_eq!(metadata.http_put_response_hop_limit(), Some(2));
    assert_eq!(
        metadata.http_endpoint().map(|e| e.as_str()),
        Some("enabled")
    );
    let devices = data.block_device_mappings();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].device_name(), Some("/dev/xvda"));
    let ebs = devices[0].ebs().unwrap();
    assert_eq!(ebs.volume_size(), Some(94), "100G rounds up to 94 GiB");
    assert_eq!(ebs.encrypted(), Some(true));
    let interfaces = data.network_interfaces();
    assert_eq!(
        interfaces.len(),
        1,
        "associatePublicIPAddress lives on the primary interface"
    );
    assert_eq!(interfaces[0].associate_public_ip_address(), Some(false));
    assert_eq!(
        interfaces[0].groups(),
        std::slice::from_ref(&net.security_group)
    );
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(data.user_data().unwrap())
        .unwrap();
    let user_data = String::from_utf8(user_data).unwrap();
    assert!(user_data.starts_with("MIME-Version: 1.0\n"), "{user_data}");
    assert!(
        user_data.contains("# nodewright generated NodeConfig"),
        "{user_data}"
    );
    assert!(user_data.contains("name: lt-cluster"), "{user_data}");
    assert!(user_data.contains("cidr: 10.100.0.0/16"), "{user_data}");
    assert!(user_data.contains("maxPods: 29"), "{user_data}");
    assert!(user_data.contains("key: dedicated"), "{user_data}");
    assert!(
        user_data.contains("karpenter.sh/unregistered"),
        "{user_data}"
    );
    assert!(
        user_data.contains("karpenter.sh/capacity-type=on-demand"),
        "{user_data}"
    );

    // The same launch again uses the same template; deleting the class's
    // templates removes it.
    cloud
        .create(
            &claim("lt-claim-2", "lt-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(
        cloud
            .launch_templates()
            .list_for_class("lt-class")
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        cloud
            .launch_templates()
            .delete_for_class("lt-class")
            .await
            .unwrap(),
        1
    );
    assert!(
        cloud
            .launch_templates()
            .list_for_class("lt-class")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn on_demand_and_spot_fleets_tag_what_they_launch_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "fleet-cluster");
    let class = class("fleet-class", &net, "");

    let on_demand = cloud
        .create(
            &claim(
                "fleet-od",
                "fleet-class",
                &["m5.large", "m5.xlarge"],
                "on-demand",
            ),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(
        label(&on_demand, "node.kubernetes.io/instance-type"),
        "m5.large"
    );
    assert_eq!(label(&on_demand, "karpenter.sh/capacity-type"), "on-demand");
    assert_eq!(
        label(&on_demand, "karpenter.k8s.aws/instance-tenancy"),
        "default"
    );
    let zone = label(&on_demand, "topology.kubernetes.io/zone").to_string();
    let zone_id = label(&on_demand, "topology.k8s.aws/zone-id");
    assert_eq!(
        zone_id,
        if zone == "us-east-1a" {
            "use1-az1"
        } else {
            "use1-az2"
        }
    );
    let status = on_demand.status.clone().unwrap();
    assert_eq!(status.image_id.as_deref(), Some(net.image.as_str()));
    assert_eq!(status.capacity.unwrap()["cpu"].0, "2");
    let annotations = on_demand.metadata.annotations.clone().unwrap();
    // The class's hash now, of nodewright's version, not the one the class
    // carries (Karpenter's).
    assert_eq!(
        annotations["karpenter.k8s.aws/ec2nodeclass-hash"],
        class.class.hash()
    );
    assert_ne!(annotations["karpenter.k8s.aws/ec2nodeclass-hash"], "1234");
    assert_eq!(
        annotations["karpenter.k8s.aws/ec2nodeclass-hash-version"],
        nodewright::apis::ec2nodeclass::EC2_NODE_CLASS_HASH_VERSION
    );
    assert_eq!(
        annotations["karpenter.k8s.aws/instance-profile-name"],
        "nodes-profile"
    );

    let instance = describe(&clients, &instance_id(&on_demand)).await;
    let instance_tags = tags(instance.tags());
    for (key, value) in [
        ("karpenter.sh/nodepool", "general"),
        ("karpenter.sh/nodeclaim", "fleet-od"),
        ("karpenter.k8s.aws/ec2nodeclass", "fleet-class"),
        ("eks:eks-cluster-name", "fleet-cluster"),
        ("kubernetes.io/cluster/fleet-cluster", "owned"),
        ("team", "web"),
    ] {
        assert_eq!(
            instance_tags.get(key).map(String::as_str),
            Some(value),
            "{key}"
        );
    }
    assert_eq!(instance.image_id(), Some(net.image.as_str()));
    assert_eq!(
        instance.placement().unwrap().availability_zone(),
        Some(zone.as_str())
    );

    let spot = cloud
        .create(
            &claim("fleet-spot", "fleet-class", &["m5.large"], "spot"),
            &class,
        )
        .await
        .unwrap();
    assert_eq!(label(&spot, "karpenter.sh/capacity-type"), "spot");
    let instance = describe(&clients, &instance_id(&spot)).await;
    assert_eq!(
        tags(instance.tags())["karpenter.sh/nodeclaim"],
        "fleet-spot"
    );
}

#[tokio::test]
async fn get_list_and_delete_find_and_terminate_instances_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "gld-cluster");
    let class = class("gld-class", &net, "");
    let launched = cloud
        .create(
            &claim("gld-claim", "gld-class", &["m5.large"], "on-demand"),
            &class,
        )
        .await
        .unwrap();

    let got = cloud.get(&provider_id(&launched)).await.unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("gld-claim"));
    assert_eq!(label(&got, "node.kubernetes.io/instance-type"), "m5.large");
    assert_eq!(label(&got, "karpenter.sh/nodepool"), "general");
    assert_eq!(got.spec.node_class_ref.name, "gld-class");
    assert_eq!(
        got.status.unwrap().provider_id,
        Some(provider_id(&launched))
    );

    let listed = cloud.list().await.unwrap();
    let names: Vec<Option<&str>> = listed.iter().map(|c| c.metadata.name.as_deref()).collect();
    assert_eq!(names, [Some("gld-claim")], "only this cluster's instances");

    cloud.delete(&launched).await.unwrap();
    assert!(cloud.list().await.unwrap().is_empty());
    let again = cloud.delete(&launched).await.unwrap_err();
    assert!(again.is_not_found(), "{again}");
    assert!(
        cloud
            .get(&provider_id(&launched))
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn terminating_an_instance_that_never_existed_is_not_found_in_moto() {
    let clients = moto_clients().await;
    let (cloud, _) = provider(clients, "gone-cluster");
    let mut gone = claim("gone", "gone-class", &["m5.large"], "on-demand");
    gone.status = Some(nodewright::apis::NodeClaimStatus {
        provider_id: Some("aws:///us-east-1a/i-0123456789abcdef0".to_string()),
        ..Default::default()
    });
    let err = cloud.delete(&gone).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    let err = cloud
        .get("aws:///us-east-1a/i-0123456789abcdef0")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn a_retried_create_launches_one_instance_in_moto() {
    let clients = moto_clients().await;
    let net = network(&clients).await;
    let (cloud, _) = provider(clients.clone(), "retry-cluster");
    let class = class("retry-class", &net, "");
    let request = claim("retry-claim", "retry-class", &["m5.large"], "on-demand");
    let first = cloud.create(&request, &class).await.unwrap();
    let second = cloud.create(&request, &class).await.unwrap();
    assert_eq!(provider_id(&first), provider_id(&second));
    assert_eq!(
        label(&second, "node.kubernetes.io/instance-type"),
        label(&first, "node.kubernetes.io/instance-type")
    );
    assert_eq!(cloud.list().await.unwrap().len(), 1);
}
